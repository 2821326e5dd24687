"""Searching a corpus index (issue 37), exBERT's corpus search: a piece of your sentence, a layer, optionally some
of that layer's heads; the corpus's pieces whose vectors are nearest by cosine similarity, each in its sentence, and
what they are (words, parts of speech, relations).

Scores: with no heads, the cosine of the two hidden states; with heads (exBERT's head mask), the mean over the
chosen heads of the cosine of the two pieces' outputs of that head. An exact index scores every piece; a
compressed one (IVF-PQ) finds RESCORE_FACTOR × top candidates and rescores them exactly from its float16 vectors.

Shapes: W a kind's vector width (D, or H*Dh for the heads), H heads, Dh head dim, K candidates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mha_core.analysis.index.passes import HEADS, HIDDEN, head_rows, unit_rows
from mha_core.analysis.index.store import IndexFileError, OpenIndex, file_name, model_fingerprint
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import run
from mha_core.engine.heads import model_head
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

TOP = 50  # matches a page shows
RESCORE_FACTOR = 10  # candidates a compressed index rescores exactly, per match asked for
SUMMARY_TOP = 10  # bars of each summary
SUMMARY_FIELDS = ("word", "pos", "deprel")


@dataclass(frozen=True)
class Match:
    sentence: int  # the 0-based line (plain text) or CoNLL-U sentence
    position: int  # the piece's position in its sentence, the model's special pieces counted
    piece: str
    word: str  # the corpus's word it is part of ("" where none)
    score: float  # cosine similarity (the chosen heads' mean), best first
    context: str  # its sentence
    start: int  # the piece's characters in `context`: [start, end)
    end: int
    pos: str | None  # part of speech, where the corpus has them
    deprel: str | None  # dependency relation, where the corpus has them

    @property
    def distance(self) -> float:
        return 1.0 - self.score

    def marked(self, before: str = "[", after: str = "]", around: int = 60) -> str:
        """The sentence with the matched piece between `before` and `after`, cut to `around` characters each
        side (… where cut)."""
        start = self.start + len(self.context[self.start:self.end]) - len(self.context[self.start:self.end].lstrip())
        left, right = self.context[:start], self.context[self.end:]  # a piece's leading space stays outside
        left = left if len(left) <= around else "…" + left[-around:]
        right = right if len(right) <= around else right[:around] + "…"
        return f"{left}{before}{self.context[start:self.end]}{after}{right}"

    def as_json(self) -> dict:
        return {"sentence": self.sentence, "position": self.position, "piece": self.piece, "word": self.word,
                "score": round(self.score, 6), "context": self.context, "span": [self.start, self.end],
                "pos": self.pos, "deprel": self.deprel}


@dataclass(frozen=True)
class SearchResult(Drawable):
    model: str
    layer: int  # hidden_states[layer]; with heads, the heads of attention layer `layer`
    heads: tuple[int, ...]  # the chosen heads of that layer (0-based), () for the hidden state
    piece: str  # the query piece
    position: int  # its position in the typed sentence, special pieces counted
    matches: tuple[Match, ...]  # best first
    corpus: str

    def summary(self, field: str) -> list[tuple[str, int]]:
        """The matches' most common values of `field` (word, pos, deprel), most common first; [] when the corpus has
        none."""
        values = [getattr(m, field) for m in self.matches]
        counts = Counter(v.lower() if field == "word" else v for v in values if v)
        return counts.most_common(SUMMARY_TOP)

    def as_json(self) -> dict:
        return {"model": self.model, "layer": self.layer, "heads": [[self.layer, h] for h in self.heads],
                "corpus": self.corpus, "query": {"piece": self.piece, "position": self.position},
                "matches": [m.as_json() for m in self.matches]}


def check_query(index: OpenIndex, model: LoadedModel, layer: int, heads: tuple[int, ...]) -> str:
    """The kind of vector to search, after checking that the model reads text, that the index was built with this
    model and holds `layer` (and heads there); one sentence naming both otherwise."""
    manifest = index.manifest
    layers = ", ".join(map(str, manifest.layers))
    if model.arch.image or model.arch.audio or model.encoder_decoder:
        raise InputError("index_model_not_text", N_("{model} does not read a sentence alone (it reads images, hears "
                                                     "audio or pairs a source with a target): a corpus index is "
                                                     "searched with the text model it was built with, {built}"),
                         model=model.name, built=manifest.model)
    if manifest.model != model.name:
        raise IndexFileError("index_other_model", N_("{folder} was built with {built} (layers {layers}); the query "
                                                     "runs {model}: search it with {built}, or build an index with "
                                                     "{model}"),
                             folder=index.folder.name, built=manifest.model, layers=layers, model=model.name)
    if manifest.data["fingerprint"] != model_fingerprint(model):
        raise IndexFileError("index_other_checkpoint", N_("{folder} was built with another checkpoint of {model} (its "
                                                          "configuration or weights differ from this one's): build "
                                                          "the index again with this one"),
                             folder=index.folder.name, model=model.name)
    if layer not in manifest.layers:
        raise IndexFileError("index_other_layer", N_("{folder} holds layers {layers} of {built}; layer {layer} is not "
                                                     "among them"), folder=index.folder.name, layers=layers,
                             built=manifest.model, layer=layer)
    if not heads:
        return HIDDEN
    if not manifest.has(layer, HEADS):
        raise InputError("index_no_heads_on_layer", N_("layer {layer} is the last layer's output: no head runs on it; "
                                                   "choose heads of a layer from 0 to {last}"),
                         layer=layer, last=model.n_layers - 1)
    for head in heads:
        model_head(model, layer, head)
    return HEADS


PROBE_AGREEMENT = 0.99  # the mean cosine of the stored and recomputed vectors of one sentence's pieces at least
PROBE_TIE = 1e-9  # and no other layer's or kind's vectors agree better by more than this


def check_stored_vectors(index: OpenIndex, model: LoadedModel, layer: int, kind: str) -> None:
    """The stored vectors of `layer`'s `kind` are what the model computes there: one indexed sentence is run again,
    and its stored vectors must agree with that layer's and kind's recomputed ones, and better than with any other
    layer's or kind's of the same width (files swapped between layers or kinds, with the manifest's sizes and hashes
    changed to match, pass every other check). Once per index, layer and kind."""
    if (layer, kind) in index.verified:
        return
    first = index.pieces.slice(0, 64)  # a sentence's pieces are together (index_store): the first one's are first
    sentences = np.asarray(first.column("sentence"))
    sentence = int(sentences[0])
    rows = np.flatnonzero(sentences == sentence)  # (k,) its pieces' rows
    positions = torch.as_tensor(np.asarray(first.column("position"))[rows])  # (k,)
    result = run(model, index.sentence_text[sentence], path="explicit")
    agreement = {}
    if positions.max() < result.lengths[0]:
        stored = stored_rows(index, layer, kind, rows)  # (k,W)
        for (other_layer, other_kind), recomputed in recomputed_rows(model, result, positions).items():
            if recomputed.shape == stored.shape:
                agreement[other_layer, other_kind] = float(np.mean(np.sum(stored * recomputed, axis=1)))
    mine = agreement.get((layer, kind), 0.0)
    if not (mine >= PROBE_AGREEMENT and mine >= max(agreement.values()) - PROBE_TIE):
        raise IndexFileError("index_vectors_not_layer", N_("{path} does not hold layer {layer}'s {kind} vectors of "
                                                           "{model}: its file was replaced or swapped"),
                             path=str(index.folder / file_name(layer, kind)), layer=layer, kind=kind,
                             model=model.name)
    index.verified.add((layer, kind))


def recomputed_rows(model: LoadedModel, result: AttentionResult, positions: torch.Tensor
                    ) -> dict[tuple[int, str], np.ndarray]:
    """{(layer, kind): (k,W)} the vectors an index stores for these positions of text 0, at every layer and kind."""
    first = torch.zeros_like(positions)
    rows = {(layer, HIDDEN): unit_rows(hidden[first, positions])  # (k,D)
            for layer, hidden in enumerate(result.hidden_states)}
    rows.update({(layer, HEADS): head_rows(context[first, :, positions])  # (k,H*Dh)
                 for layer, context in enumerate(result.layer_context[:model.n_layers])})
    return rows


def stored_rows(index: OpenIndex, layer: int, kind: str, rows: np.ndarray) -> np.ndarray:
    """(k,W) float32 the stored vectors of these rows (a flat index's own, or a compressed index's float16 rows)."""
    if index.manifest.exact:
        vectors = index.vectors(layer, kind)
        return np.stack([vectors.reconstruct(int(row)) for row in rows])
    return np.asarray(index.rows(layer, kind)[rows], dtype=np.float32)


def query_vector(result: AttentionResult, position: int, layer: int, heads: tuple[int, ...]) -> np.ndarray:
    """(W,) the query piece's vector: its hidden state as a unit vector; with heads, each chosen head's output a unit
    vector and the other heads' parts zero, so that its inner product with a stored piece is Σ_chosen cos_h / √H
    (score_scale makes that the mean)."""
    if not heads:
        return unit_rows(result.hidden_states[layer][0, position][None])[0]  # (D,)
    rows = unit_rows(result.layer_context[layer][0, :, position])  # (H,Dh) each head a unit vector
    n_heads = rows.shape[0]
    mask = np.zeros(n_heads, dtype=np.float32)
    mask[list(heads)] = 1.0
    return (rows * mask[:, None]).reshape(-1)  # (H*Dh,) inner product with a stored piece = Σ cos_h / √H


def score_scale(n_heads: int, heads: tuple[int, ...]) -> float:
    """Σ_h∈chosen cos_h / √H (the inner product) times this is the chosen heads' mean cosine."""
    return n_heads**0.5 / len(heads) if heads else 1.0


def nearest(index: OpenIndex, layer: int, kind: str, query: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids) of the `top` stored vectors with the largest inner product with `query`, best first."""
    vectors = index.vectors(layer, kind)
    top = min(top, vectors.ntotal)
    if index.manifest.exact:
        scores, ids = vectors.search(query[None].astype(np.float32), top)
        return scores[0], ids[0]
    _, candidates = vectors.search(query[None].astype(np.float32), min(vectors.ntotal, top * RESCORE_FACTOR))
    candidates = np.sort(candidates[0][candidates[0] >= 0])  # (K,) in file order: the rows are read in one sweep
    exact = index.rows(layer, kind)[candidates].astype(np.float32) @ query  # (K,)
    best = np.argsort(-exact, kind="stable")[:top]
    return exact[best], candidates[best]


def search(index: OpenIndex, model: LoadedModel, result: AttentionResult, position: int, layer: int,
           heads: tuple[int, ...] = (), top: int = TOP) -> SearchResult:
    """The `top` pieces of the index nearest to piece `position` of the sentence `result` ran (explicit path: the
    heads' outputs are kept), at `layer`, by the hidden state or the chosen heads' outputs."""
    heads = tuple(sorted(set(heads)))
    return nearest_pieces(index, model, result, position, layer, heads, top, checked_kind(index, model, layer,
                                                                                          heads, top))


def checked_kind(index: OpenIndex, model: LoadedModel, layer: int, heads: tuple[int, ...], top: int) -> str:
    """What a search needs before the sentence's pieces are read: a top of at least 1, check_query's model and
    layer, and the stored vectors the model's own (check_stored_vectors); the kind of vector to search."""
    if top < 1:
        raise InputError("index_top", N_("a search finds at least 1 match; {top} were asked for"), top=top)
    kind = check_query(index, model, layer, heads)
    check_stored_vectors(index, model, layer, kind)
    return kind


def nearest_pieces(index: OpenIndex, model: LoadedModel, result: AttentionResult, position: int, layer: int,
                   heads: tuple[int, ...], top: int, kind: str) -> SearchResult:
    """search() once checked_kind has passed."""
    length = result.lengths[0]
    if not 0 <= position < length:
        raise InputError("index_token_range", N_("the sentence has pieces 0 to {last} (special pieces counted); "
                                                 "{position} is not one"), last=length - 1, position=position)
    if heads and result.layer_context is None:
        raise ValueError("search by heads needs the explicit path's heads' outputs")
    scores, ids = nearest(index, layer, kind, query_vector(result, position, layer, heads), top)
    scale = score_scale(model.n_heads, heads)
    matches = tuple(matches_of(index, ids[ids >= 0], scores[ids >= 0] * scale))
    return SearchResult(model.name, layer, heads, result.labels[0][position], position, matches,
                        index.manifest.data["corpus"])


def matches_of(index: OpenIndex, ids: np.ndarray, scores: np.ndarray) -> list[Match]:
    rows: dict[str, list[Any]] = index.pieces.take(ids).to_pydict()
    texts = index.sentence_text
    return [Match(rows["sentence"][i], rows["position"][i], rows["piece"][i], rows["word"][i], float(scores[i]),
                  texts[rows["sentence"][i]], rows["start"][i], rows["end"][i], rows["pos"][i], rows["deprel"][i])
            for i in range(len(ids))]


def search_text(index: OpenIndex | str | Path, model: LoadedModel, text: str, token: int, layer: int,
                heads: tuple[int, ...] = (), top: int = TOP) -> SearchResult:
    """search() for a typed sentence (a notebook's and the CLI's way in): `index` an OpenIndex or its folder, `token`
    the piece's position with the model's special pieces counted."""
    opened = index if isinstance(index, OpenIndex) else OpenIndex(index)
    heads = tuple(sorted(set(heads)))
    kind = checked_kind(opened, model, layer, heads, top)  # before the model runs: one that reads no text is refused
    return nearest_pieces(opened, model, run(model, text, path="explicit"), token, layer, heads, top, kind)
