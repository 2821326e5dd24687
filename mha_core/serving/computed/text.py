"""The computations a page may ask for about one sentence, each by name (issue 34). Each function's key names the
model (its folder), the text, every option the value depends on and, where the value holds words a person reads,
the language; a page passes the Server, what the visitor chose and (for queued work) how it shows a wait, and draws
what comes back. serving.computed_corpus holds long texts and corpora.

Stores (serving.memory.STORES): "results" forwards, "views" display maps, "small" everything light.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence

import numpy as np

from mha_core.analysis.coref.sentence import AntecedentScores, Word, antecedent_scores
from mha_core.analysis.heads.contrib import (
    ValueWeighted,
    ValueWeightedSummary,
    rollout_of,
    value_weighted,
    value_weighted_summary,
)
from mha_core.analysis.heads.display import AttentionView, attention_view, words_by_default
from mha_core.analysis.heads.induction import INDUCTION_SEED, INDUCTION_SEQUENCES, InductionScores, induction_scores
from mha_core.analysis.heads.pairs import PairShares, pair_shares
from mha_core.analysis.heads.roles import HeadRoles, head_roles
from mha_core.analysis.lm.ablation import AblationGrid, ablate_heads, ablation_grid
from mha_core.analysis.lm.generate import Generation, generate
from mha_core.analysis.lm.patching import HEAD, HEADS, RESIDUAL, PatchGrid, patch_grid
from mha_core.analysis.lm.predict import (
    Attribution,
    LayerEffect,
    LogitLens,
    Prediction,
    ProbeAnswer,
    attribute,
    layer_effect,
    logit_lens,
    predict,
    probe_answers,
)
from mha_core.analysis.params.counts import ModelBreakdown, head_weight_norms, model_breakdown
from mha_core.engine.batching import Progress
from mha_core.engine.forward import run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.i18n import Worded
from mha_core.messages import N_
from mha_core.serving import on_disk
from mha_core.serving.forwards import shareable
from mha_core.serving.server import Server, Wait
from mha_core.teaching.claims import PronounRow, pronoun_row
from mha_core.teaching.examples import Question, default_question, focus, focus_words
from mha_core.teaching.walkthrough import Parity, PathTimings, Walkthrough, parity, time_paths, walkthrough


def of(model: LoadedModel) -> str:
    """A model's part of every key: its folder."""
    return str(model.model_dir)


def digest(data: bytes) -> str:
    """An upload's part of every key (a clip, a photo): the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


# The forward and what the pages draw from it


def result_of(server: Server, model: LoadedModel, texts: Sequence[str], path: str = "auto",
              pairs: Sequence[str] | None = None) -> AttentionResult:
    """mha_core.run, once per model, texts, path and second texts of sentence pairs (frozen: every session reads the
    same object). A sentence asked for on its own may share its forward with others asked for at the same moment
    (serving.forwards; the result is the sentence's own)."""
    texts, pairs = tuple(texts), None if pairs is None else tuple(pairs)
    key = ("result", of(model), texts, path, pairs)
    if pairs is None and len(texts) == 1 and shareable(model, texts[0], path):
        return server.kept("results", key, lambda: server.forwards.read(model, texts[0], path))  # in a slot
    return server.in_slot("results", key, lambda: run(model, list(texts), path=path, pairs=pairs))


def view_of(server: Server, model: LoadedModel, text: str, path: str, hide_special: bool, merge_words: bool,
            average_heads: bool = False, pair: str | None = None) -> AttentionView:
    """The maps of one text (or of a sentence pair, `pair` its second text) as the Heads page shows them (specials
    hidden, words merged, heads averaged)."""
    def compute() -> AttentionView:
        pairs = None if pair is None else (pair,)
        result = result_of(server, model, (text,), path, pairs)  # outside the slot: it takes one of its own
        with server.slots:
            return attention_view(result, 0, hide_special, merge_words, average_heads)

    key = ("view", of(model), text, path, hide_special, merge_words, average_heads, pair)
    return server.kept("views", key, compute)


def lesson_row_of(server: Server, model: LoadedModel, text: str) -> PronounRow:
    """The lesson's row for `text`: the clearest head's row from the sentence's pronoun (teaching.claims.pronoun_row)
    in its maps as the Heads page shows them, once per server: every follower of a step shows it (issue 84)."""
    def compute() -> PronounRow:
        view = view_of(server, model, text, "auto", True, words_by_default(text))
        found = focus(text, model.name)
        return pronoun_row(view, result_of(server, model, (text,)), found.pronoun, found.antecedent, found.other)

    return server.kept("small", ("lesson row", of(model), text), compute)


def parity_of(server: Server, model: LoadedModel, text: str) -> Parity:
    return server.kept("small", ("parity", of(model), text),
                       lambda: parity(model, text, result_of(server, model, (text,), "explicit")))


def timings_of(server: Server, model: LoadedModel, text: str) -> PathTimings:
    return server.in_slot("small", ("timings", of(model), text), lambda: time_paths(model, text))


def breakdown_of(server: Server, model: LoadedModel) -> ModelBreakdown:
    return server.kept("small", ("breakdown", of(model)), lambda: model_breakdown(model))


def weight_norms_of(server: Server, model: LoadedModel) -> tuple[np.ndarray, np.ndarray]:
    """(L,H) ‖W_Q W_Kᵀ‖ and ‖W_V W_O‖ of every head."""
    def compute() -> tuple[np.ndarray, np.ndarray]:
        qk, ov = head_weight_norms(model)
        return qk.numpy(), ov.numpy()

    return server.kept("small", ("weight norms", of(model)), compute)


def walkthrough_of(server: Server, model: LoadedModel, text: str, layer: int, head: int) -> Walkthrough:
    """One head's steps on the explicit path's result."""
    return server.kept("small", ("walkthrough", of(model), text, layer, head),
                       lambda: walkthrough(model, result_of(server, model, (text,), "explicit"), layer, head))


def layer_effect_of(server: Server, model: LoadedModel, text: str, layer: int, query: int) -> LayerEffect:
    return server.in_slot("small", ("layer effect", of(model), text, layer, query),
                          lambda: layer_effect(model, text, layer, query))


def head_roles_of(server: Server, model: LoadedModel, text: str) -> HeadRoles:
    return server.kept("small", ("head roles", of(model), text),
                       lambda: head_roles(result_of(server, model, (text,))))


def pair_roles_of(server: Server, model: LoadedModel, text: str, pair: str) -> tuple[HeadRoles, PairShares]:
    """A sentence pair's head roles ([SEP] heads among them) and each head's share of attention crossing between
    the two texts (its cross-sentence heads)."""
    def compute() -> tuple[HeadRoles, PairShares]:
        result = result_of(server, model, (text,), "auto", (pair,))
        return head_roles(result), pair_shares(result)

    return server.kept("small", ("pair roles", of(model), text, pair), compute)


# The model's induction probe kept on disk (serving.on_disk; `make prepare` writes it)
INDUCTION = on_disk.OnDisk("induction", InductionScores, lambda: [INDUCTION_SEQUENCES, INDUCTION_SEED],
                           lambda model, progress: induction_scores(model))


def induction_of(server: Server, model: LoadedModel) -> InductionScores:
    """The induction probe on repeated random sequences (Roles and Across a corpus label heads with it): read from
    the cache when kept there, else computed in a slot (about 9 s on a bundled decoder) and kept."""
    key = ("induction", of(model))
    with contextlib.suppress(on_disk.NotKept):
        return server.kept("small", key, lambda: INDUCTION.kept(model))
    return server.in_slot("small", key, lambda: INDUCTION.keep(model))


# One sentence's words and questions


def words_of(server: Server, text: str) -> list[Word]:
    """spaCy's words of a sentence (no model), tagged with the sentences other visitors ask for at the same moment
    (serving.forwards.SharedTags), then kept where sentence_words finds them (teaching.examples.focus reads them)."""
    return server.kept("small", ("words", text), lambda: server.tags.words(text))


def focus_of(server: Server, text: str) -> tuple[str, str]:
    """teaching.examples.focus_words (the sentence's pronoun and the word it names), its words tagged by words_of:
    with the sentences other visitors ask for at the same moment."""
    words_of(server, text)  # kept where focus_words's sentence_words reads them
    return focus_words(text)


def antecedents_of(server: Server, model: LoadedModel, text: str, path: str, words: Sequence[Word], pronoun: int,
                   candidates: Sequence[int]) -> AntecedentScores:
    """The candidates' scores in every head for the pronoun (words: words_of(text))."""
    return server.kept("small", ("antecedents", of(model), text, path, pronoun, tuple(candidates)),
                       lambda: antecedent_scores(result_of(server, model, (text,), path), 0, list(words), pronoun,
                                                 list(candidates)))


def probe_answers_of(server: Server, model: LoadedModel, text: str, words: Sequence[Word], pronoun: int,
                     candidates: Sequence[int]) -> ProbeAnswer:
    return server.in_slot("small", ("probe answers", of(model), text, pronoun, tuple(candidates)),
                          lambda: probe_answers(model, text, words[pronoun], [words[i] for i in candidates]))


def question_of(server: Server, model: LoadedModel, sentence: str) -> Question:
    """The Predictions page's default question about the sentence (teaching.examples.default_question)."""
    return server.kept("small", ("question", of(model), sentence), lambda: default_question(model, sentence))


# Light analyses: one compute slot each, never queued behind a corpus


def prediction_of(server: Server, model: LoadedModel, text: str, position: int | None) -> Prediction:
    return server.in_slot("small", ("predict", of(model), text, position), lambda: predict(model, text, position))


def attribution_of(server: Server, model: LoadedModel, text: str, answer: str, wrong: str | None) -> Attribution:
    return server.in_slot("small", ("attribute", of(model), text, answer, wrong),
                          lambda: attribute(model, text, answer, wrong))


def generation_of(server: Server, model: LoadedModel, text: str, new: int, temperature: float, top_k: int | None,
                  seed: int, chat: bool) -> Generation:
    return server.in_slot("small", ("generate", of(model), text, new, temperature, top_k, seed, chat),
                          lambda: generate(model, text, new, temperature, top_k, seed, chat=chat))


def value_weighted_of(server: Server, model: LoadedModel, text: str, layer: int) -> ValueWeighted:
    return server.in_slot("small", ("value-weighted", of(model), text, layer),
                          lambda: value_weighted(model, result_of(server, model, (text,)), layer))


def joint_ablation_of(server: Server, model: LoadedModel, text: str, heads: Sequence[tuple[int, int]], mode: str,
                      measure: str, target: str | None, position: int | None) -> float:
    return server.in_slot("small", ("joint ablation", of(model), text, tuple(heads), mode, measure, target, position),
                          lambda: ablate_heads(model, text, list(heads), mode, measure, target, position))


# Heavy analyses: through the queue, with progress


def lens_of(server: Server, model: LoadedModel, text: str, wait: Wait) -> LogitLens:
    return server.queued("small", ("lens", of(model), text), N_("Reading every layer through the unembedding"),
                         lambda _: logit_lens(model, text), wait)


PATCH_LABELS = {HEADS: N_("Patching the {n_heads} heads of each layer"), RESIDUAL: N_("Patching every layer's stream"),
                HEAD: N_("Patching one head, position by position")}


def patch_grid_of(server: Server, model: LoadedModel, clean: str, corrupted: str, answer: str | None,
                  wrong: str | None, what: str, head: tuple[int, int] | None, coref: Sequence[Word] | None,
                  wait: Wait, kept: bool = False) -> PatchGrid:
    """The patching grid, queued; `kept` (an offered example's pair, whose grid runs before anyone asks: the
    Coreference page's teaching.examples.patched_unasked) read from the cache when there, else computed and kept
    there: every process of a server, and the next server, reads it (about 10 s of a core on SmolLM2). A typed
    pair's grid is never written to disk."""
    key = ("patch", of(model), clean, corrupted, answer, wrong, what, head,
           tuple((w.text, w.start) for w in coref or ()))
    label = Worded(PATCH_LABELS[what], n_heads=model.n_heads)

    def compute(progress: Progress) -> PatchGrid:
        return patch_grid(model, clean, corrupted, answer, wrong, what, head, coref, progress)

    if not kept:
        return server.queued("small", key, label, compute, wait)
    path = on_disk.kept_path(model, "patch-grid", key[2:])
    return on_disk.read_or_queued(server, "small", key, label, lambda: on_disk.read(path, PatchGrid),
                                  lambda progress: on_disk.written(path, compute(progress)), wait)


def ablation_of(server: Server, model: LoadedModel, text: str, mode: str, measure: str, target: str | None,
                position: int | None, wait: Wait) -> AblationGrid:
    return server.queued("small", ("ablation", of(model), text, mode, measure, target, position),
                         Worded(N_("Ablating each of the {total} heads"), total=model.n_layers * model.n_heads),
                         lambda progress: ablation_grid(model, text, mode, measure, target, position, progress), wait)


def value_weighted_summary_of(server: Server, model: LoadedModel, text: str, wait: Wait) -> ValueWeightedSummary:
    return server.queued("small", ("value-weighted summary", of(model), text),
                         N_("Value-weighted maps, layer by layer"),
                         lambda progress: value_weighted_summary(model, result_of(server, model, (text,)),
                                                                 progress=progress), wait)


def rollout_result_of(server: Server, model: LoadedModel, text: str, wait: Wait) -> np.ndarray:
    """(L,T,T) attention rolled out to each layer (Abnar & Zuidema)."""
    return server.queued("small", ("rollout", of(model), text), N_("Rolling attention out, layer by layer"),
                         lambda progress: rollout_of(model, result_of(server, model, (text,)), progress=progress),
                         wait)
