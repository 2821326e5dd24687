"""The computations a page may ask for about long texts and corpora, each by name (issue 34; serving.computed holds
one sentence's). A corpus is named by `source`, a key its page gives from the file's content (an upload's hash, the
bundled corpus's path), so that one file uploaded by many visitors is read once.

Stores (serving.memory.STORES): "long" long texts, "corpus passes", "corpus analyses", "sentence analyses", "small".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mha_core.analysis.coref.gap import CorefResult, analyse_coref
from mha_core.analysis.corpus.distances import HeadMap
from mha_core.analysis.corpus.passes import CorpusPass, HeadDistances, corpus_pass
from mha_core.analysis.corpus.readers import (
    BUNDLED_CORPUS,
    CHINESE_TREEBANK,
    GapExample,
    ParsedSentence,
    bundled_corpus,
    chinese_treebank,
    spacy_parse,
)
from mha_core.analysis.corpus.syntax import CorpusAnalysis, analyse_corpus
from mha_core.analysis.heads.projection import PCA, duration_note
from mha_core.analysis.heads.qk_view import QKView, qk_view, token_pos
from mha_core.analysis.index.build import BUNDLED_CHINESE_SOURCE
from mha_core.analysis.long.roles import NeedleProbe, SinkGrowth, needle_probe, sink_growth
from mha_core.analysis.long.text import (
    HeadSummaries,
    count_long_pieces,
    head_summaries,
    is_long,
    may_be_long,
    run_long,
)
from mha_core.engine.batching import Progress
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError
from mha_core.figures.corpus import qk_hover
from mha_core.i18n import Worded
from mha_core.messages import N_
from mha_core.serving import on_disk
from mha_core.serving.computed.text import of
from mha_core.serving.server import Server, Wait


@dataclass(frozen=True)
class LongText:
    result: AttentionResult  # q, k and the log-sum-exp of every layer, the last hidden states
    summaries: HeadSummaries  # every head's summaries


def long_pieces_of(server: Server, model: LoadedModel, text: str) -> int:
    """How many pieces the model reads of `text`, up to its long limit (a long text's count costs ~0.1 s); 0 for a
    text it cannot read (the page's usual run says why)."""
    def count() -> int:
        try:
            return count_long_pieces(model, text)
        except InputError:
            return 0

    return server.kept("small", ("long pieces", of(model), text), count)


def reads_long(server: Server, model: LoadedModel, text: str) -> bool:
    """Whether the Heads page reads `text` the long way (over arch.MAX_PIECES pieces); a text too short for any
    tokenizer to make that many pieces of (may_be_long) is not tokenized to know."""
    return may_be_long(text) and is_long(long_pieces_of(server, model, text))


def long_text_of(server: Server, model: LoadedModel, text: str, wait: Wait) -> LongText:
    """A long text read layer by layer (q, k and log-sum-exp kept), then every head summarised."""
    def compute(progress: Progress) -> LongText:
        total = 2 * model.n_layers  # the forward's layers, then the summaries' layers
        result = run_long(model, text, lambda done, _: progress(done, total))
        summaries = head_summaries(result, progress=lambda done, _: progress(model.n_layers + done, total))
        return LongText(result, summaries)

    return server.queued("long", ("long", of(model), text),
                         N_("Reading the long text layer by layer, then summarising every head"), compute, wait)


def sink_growth_of(server: Server, model: LoadedModel, lengths: tuple[int, ...], wait: Wait) -> SinkGrowth:
    return server.queued("small", ("sinks", of(model), lengths), N_("Reading the text at each length"),
                         lambda progress: sink_growth(model, lengths, progress), wait)


def needle_of(server: Server, model: LoadedModel, n_pieces: int, depth: float, wait: Wait) -> NeedleProbe:
    return server.queued("small", ("needle", of(model), n_pieces, depth), N_("Running the needle probe"),
                         lambda progress: needle_probe(model, n_pieces, depth, progress), wait)


def parsed_corpus_of(server: Server, wait: Wait) -> list[ParsedSentence]:
    """The bundled corpus parsed by spaCy (no model)."""
    return server.queued("corpus analyses", ("spacy", "bundled corpus"), N_("Parsing the corpus with spaCy"),
                         lambda progress: spacy_parse(bundled_corpus()), wait)


def chinese_treebank_of(server: Server) -> list[ParsedSentence]:
    """The bundled Chinese treebank's gold trees (UD Chinese GSDSimp), read once per server."""
    return server.kept("small", ("treebank", "zh"), chinese_treebank)


def corpus_key(path: Path) -> str:
    """A corpus file's part of every key (the bundled corpus, the Chinese treebank)."""
    return f"corpus:{path}"


KEPT_ON_DISK = (corpus_key(BUNDLED_CORPUS), corpus_key(CHINESE_TREEBANK))  # sources whose analyses the cache keeps


def bundled_trees(source: str) -> list[ParsedSentence]:
    """The parsed sentences of a bundled corpus (analysis.index.build's source names) as the pages analyse them: the
    Chinese treebank's gold trees, the English corpus's as spaCy parses them."""
    return chinese_treebank() if source == BUNDLED_CHINESE_SOURCE else spacy_parse(bundled_corpus())


# A bundled corpus's analysis kept on disk (serving.on_disk), named by its sentences' content (the English corpus's
# trees are spaCy's: another parser's trees are other sentences); `make prepare` or the first visitor writes it
ANALYSIS = on_disk.OnDisk(
    "corpus", CorpusAnalysis, lambda sentences: on_disk.content_digest([dataclasses.astuple(s) for s in sentences]),
    lambda model, sentences, progress: analyse_corpus(model, sentences, progress))


def corpus_analysis_of(server: Server, model: LoadedModel, source: str, sentences: Sequence[ParsedSentence],
                       one_sentence: bool, wait: Wait) -> CorpusAnalysis:
    """Head roles and Clark's syntactic heads of parsed sentences (the Roles page and Across a corpus share it); one
    typed sentence runs at once in a compute slot, in its own store, never queued behind a corpus. A bundled corpus's
    analysis is read from the cache when kept there (`make prepare`), else computed and kept."""
    key, compute = ("analysis", of(model), source), lambda progress: analyse_corpus(model, sentences, progress)
    if one_sentence:
        return server.in_slot("sentence analyses", key, lambda: compute(lambda done, total: None))
    if source not in KEPT_ON_DISK:
        return server.queued("corpus analyses", key, N_("Running the model over the sentences"), compute, wait)
    return ANALYSIS.read_or_queued(server, "corpus analyses", key, N_("Running the model over the sentences"), wait,
                                   model, sentences)


def gap_analysis_of(server: Server, model: LoadedModel, source: str, examples: Sequence[GapExample],
                    wait: Wait) -> CorefResult:
    return server.queued("corpus analyses", ("gap", of(model), source), N_("Scoring GAP examples"),
                         lambda progress: analyse_coref(model, examples, progress), wait)


def corpus_pass_of(server: Server, model: LoadedModel, source: str, texts: Sequence[str], wait: Wait) -> CorpusPass:
    """Every head's rows over a corpus, with the queries and keys the query-key view projects."""
    return server.queued("corpus passes", ("pass", of(model), source), N_("Running the model over the corpus"),
                         lambda progress: corpus_pass(model, texts, progress), wait)


def bundled_texts(source: str) -> list[str]:
    """A bundled corpus's sentences (analysis.index.build's source names) as Across a corpus reads them."""
    return [s.text for s in chinese_treebank()] if source == BUNDLED_CHINESE_SOURCE else bundled_corpus()


# A bundled corpus's head distances kept on disk (serving.on_disk), computed without the query and key vectors
DISTANCES = on_disk.OnDisk(
    "distances", HeadDistances, lambda texts: on_disk.content_digest(list(texts)),
    lambda model, texts, progress: corpus_pass(model, texts, progress, keep_vectors=False).distances())


def head_distances_of(server: Server, model: LoadedModel, source: str, texts: Sequence[str],
                      wait: Wait) -> HeadDistances:
    """The heads' distances and role metrics over a corpus (the head-similarity map). A bundled corpus's are read from
    the cache when kept there (`make prepare`), else computed without the query and key vectors and kept; an
    upload's are its whole pass's, which the query-key view then shares."""
    if source not in KEPT_ON_DISK:
        return corpus_pass_of(server, model, source, texts, wait).distances()
    return DISTANCES.read_or_queued(server, "corpus analyses", ("distances", of(model), source),
                                    N_("Running the model over the corpus"), wait, model, texts)


def head_map_of(server: Server, model: LoadedModel, source: str, corpus: HeadDistances) -> HeadMap:
    """Metric MDS of the heads' distances (corpus: head_distances_of(source))."""
    return server.kept("small", ("head map", of(model), source), corpus.head_map)


def qk_view_of(server: Server, model: LoadedModel, source: str, corpus: CorpusPass, layer: int, head: int,
               method: str, wait: Wait) -> QKView:
    """One head's queries and keys projected to a plane: PCA at once; UMAP and t-SNE (seconds to minutes) queued, in
    a child process killed when nobody waits for it."""
    key = ("qk view", of(model), source, layer, head, method)
    if method == PCA:
        return server.kept("small", key, lambda: qk_view(corpus, layer, head, method))
    n_points = 2 * len(corpus.labels)  # every token's query and key
    label = Worded(N_("Projecting {n:,} points with {method} ({duration})"), n=n_points, method=method,
                   duration=duration_note(method, n_points))
    return server.queued("small", key, label,
                         lambda progress: qk_view(corpus, layer, head, method, check=lambda: progress(0, 0)), wait)


def token_pos_of(server: Server, model: LoadedModel, source: str, corpus: CorpusPass) -> tuple[str, ...]:
    return server.kept("small", ("qk pos", of(model), source), lambda: token_pos(corpus))


def qk_hover_of(server: Server, model: LoadedModel, source: str, corpus: CorpusPass, language: str) -> list[str]:
    """Each point's hover text (its words in `language`)."""
    return server.kept("small", ("qk hover", of(model), source, language), lambda: qk_hover(corpus))
