"""Attention beside its alternatives for one text and target, per piece and per word, each measured for
faithfulness: `explain` (methods.py, integrated.py, faithfulness.py say what each computes).

A word's score is the sum of its pieces' scores (engine/words.py merges pieces into words as every page does);
occlusion's is the score without the word.

Shapes: L layers, H heads, T pieces, W words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from mha_core.analysis.explain import methods as m
from mha_core.analysis.explain.choices import DEFAULT_METHODS, METHODS
from mha_core.analysis.explain.faithfulness import (
    CURVES,
    SHORT,
    Faithfulness,
    Known,
    curve_ks,
    edited_scores,
    kept_pieces,
    measured,
    occlusion,
    rank_correlation,
    removable_words,
    text_known,
)
from mha_core.analysis.explain.integrated import DEFAULT_STEPS, ZERO, Integrated, check_steps, integrated_gradients
from mha_core.analysis.explain.targets import Target, target_for
from mha_core.analysis.explain.vision import CLS_COSINE, ImageExplanation, explain_image
from mha_core.engine.attention import EXPLICIT
from mha_core.engine.batching import Progress
from mha_core.engine.forward import forward
from mha_core.engine.gradients import (
    GRADIENT_COST,
    Gradients,
    check_gradient_budget,
    check_text_model,
    gradients,
)
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import json_floats
from mha_core.engine.tokens import InputError, TokenBatch, tokenize
from mha_core.engine.words import Units, word_units
from mha_core.messages import N_


@dataclass(frozen=True)
class MethodScores:
    name: str
    scores: np.ndarray  # (T,) per piece (occlusion: each piece its word's score)
    word_scores: np.ndarray  # (W,) per word
    seconds: float
    faithfulness: Faithfulness | None = None

    def as_json(self) -> dict:
        out = {"scores": json_floats(self.scores), "word_scores": json_floats(self.word_scores),
               "seconds": round(self.seconds, 4)}
        if self.faithfulness is not None:
            out.update(self.faithfulness.as_json())
        return out


@dataclass(frozen=True)
class Explanation:
    model: str
    ids: tuple[int, ...]  # T
    pieces: tuple[str, ...]  # T as a reader sees them
    words: tuple[str, ...]  # W
    word_of_piece: tuple[int, ...]  # T: the word each piece is in
    target: Target
    score: float
    methods: dict[str, MethodScores]
    head: tuple[int, int]  # the chosen head (layer, head): attention_head's, its layer attention_layer's
    head_importance: np.ndarray  # (L,H) the target's gradient times each head's output
    ig: Integrated | None
    removable: tuple[int, ...]  # the words faithfulness may remove

    def correlations(self) -> dict[str, dict[str, float]]:
        """Spearman's ρ between every two methods' word scores over the removable words."""
        words = list(self.removable)
        return {a: {b: rank_correlation(self.methods[a].word_scores[words], self.methods[b].word_scores[words])
                    for b in self.methods} for a in self.methods}

    def most_faithful(self) -> str | None:
        """The method of the largest AOPC comprehensiveness minus AOPC sufficiency."""
        rated = {name: f.faithfulness.aopc_comprehensiveness - f.faithfulness.aopc_sufficiency
                 for name, f in self.methods.items() if f.faithfulness is not None and f.faithfulness.ks}
        return max(rated, key=rated.get) if rated else None

    def as_json(self) -> dict:
        target = self.target.as_json(self.score)
        return {"model": self.model, "ids": list(self.ids), "pieces": list(self.pieces), "words": list(self.words),
                "word_of_piece": list(self.word_of_piece), "target": target,
                "methods": {name: scores.as_json() for name, scores in self.methods.items()},
                "ig": None if self.ig is None else self.ig.as_json(),
                "head": list(self.head), "head_importance": json_floats(self.head_importance),
                "correlations": {a: {b: (None if np.isnan(v) else round(v, 6)) for b, v in row.items()}
                                 for a, row in self.correlations().items()},
                "most_faithful": self.most_faithful()}


def check_methods(methods: Sequence[str]) -> tuple[str, ...]:
    unknown = [name for name in methods if name not in METHODS]
    if unknown or not methods:
        raise InputError("unknown_method", N_("Unknown method {method!r}: choose from {methods}."),
                         method=unknown[0] if unknown else "", methods=", ".join(METHODS))
    return tuple(dict.fromkeys(methods))


def check_curves(curves: str) -> None:
    if curves not in CURVES:
        raise InputError("unknown_curves", N_("Unknown curves {curves!r}: choose one of {choices}."), curves=curves,
                         choices=", ".join(CURVES))


def units_of(batch: TokenBatch) -> Units:
    """Text 0's words as the pages merge them (engine/words.py; a tokenizer that numbers the whole text as one word,
    Gemma 3's, has its words cut at spaces by engine/tokens.spaced_words)."""
    unknown = batch.unknown[0] if batch.unknown else ()
    return word_units(batch.texts[0], batch.labels[0], batch.word_ids[0], batch.offsets[0], unknown)


def piece_scores(model: LoadedModel, batch: TokenBatch, target: Target, grads: Gradients, head: tuple[int, int],
                 ig: Callable[[], Integrated]) -> dict[str, Callable[[], np.ndarray]]:
    """Each method's (T,) scores, computed when called."""
    at = target.position
    layer, chosen = head
    return {
        "attention": lambda: m.attention_row(grads, at, model.n_layers - 1),
        "attention_layer": lambda: m.attention_row(grads, at, layer),
        "attention_head": lambda: m.attention_row(grads, at, layer, chosen),
        "rollout": lambda: m.rollout_row(grads, at),
        "value_weighted": lambda: m.value_weighted_row(model, forward(model, batch, EXPLICIT), at),
        "gradxattn": lambda: m.grad_attention_row(grads, at),
        "inputxgrad": lambda: m.input_x_gradient(grads),
        "ig": lambda: ig().scores,
    }


class Tally:
    """The model's passes counted for a progress bar, stage by stage, in copies of the text run forward (a gradient
    step counts GRADIENT_COST): (done, planned) over every stage, a stage's plan corrected once it knows its own."""

    def __init__(self, report: Progress | None, planned: dict[str, int]) -> None:
        self.report, self.planned, self.done = report, dict(planned), dict.fromkeys(planned, 0)

    def stage(self, name: str, weight: int = 1) -> Progress:
        def update(done: int, total: int) -> None:
            self.planned[name], self.done[name] = weight * total, weight * done
            if self.report is not None:
                self.report(sum(self.done.values()), sum(self.planned.values()))

        return update


def planned_work(methods: Sequence[str], steps: int, removable: int, curves: str | None) -> dict[str, int]:
    """Each stage's copies at most, before any is run (faithfulness, with `curves`: each method's two curves but
    the text itself, before the copies methods share are known)."""
    per_method = 2 * len(curve_ks(removable, curves)) - 2 if curves is not None else 0
    return {"gradients": GRADIENT_COST, "ig": GRADIENT_COST * steps if "ig" in methods else 0,
            "occlusion": removable if "occlusion" in methods else 0, "faithfulness": per_method * len(methods)}


def explain(model: LoadedModel, text: object, answer: str | None = None, wrong: str | None = None,
            methods: Sequence[str] | None = None, steps: int = DEFAULT_STEPS, baseline: str = ZERO,
            head: tuple[int, int] | None = None, measure: bool = True, curves: str = SHORT,
            progress: Progress | None = None, block: int | None = None) -> Explanation | ImageExplanation:
    """Every method of `methods` (default DEFAULT_METHODS) on `text` for its target (targets.py: `answer` and `wrong`
    for a model with a language-model head), per piece and per word, and with `measure` each one's faithfulness,
    every method's copies run together, the curves at `curves`' k (faithfulness.py). `progress(done, planned)`:
    copies run. A Vision Transformer reads an image instead (a path, bytes, a Pillow picture or prepared pixels) and
    explains the cosine of its final [CLS] to its own, per patch (vision.py; `block`: occlusion's block of patches
    a side)."""
    if model.arch.image:
        return explain_picture(model, text, answer or wrong, methods, steps, baseline, block)
    methods = check_methods(DEFAULT_METHODS if methods is None else methods)
    check_steps(steps)
    check_curves(curves)
    batch, target, units = prepared(model, text, answer, wrong)
    removable = removable_words(units, target)
    tally = Tally(progress, planned_work(methods, steps, len(removable), curves if measure else None))
    started = time.perf_counter()
    grads = gradients(model, batch, target.score)
    pass_seconds = time.perf_counter() - started
    tally.stage("gradients", GRADIENT_COST)(1, 1)
    chosen = head if head is not None else m.chosen_head(grads)
    score = float(grads.score[0])
    done: dict[str, Integrated] = {}

    def ig() -> Integrated:
        done["ig"] = integrated_gradients(model, batch, target, steps, baseline, score,
                                          tally.stage("ig", GRADIENT_COST))
        return done["ig"]

    makers = piece_scores(model, batch, target, grads, chosen, ig)
    results, known = method_results(model, batch, units, target, methods, makers, pass_seconds,
                                    text_known(units, score), tally.stage("occlusion"))
    if measure:
        faithful = measured(model, batch, units, target, {name: r.word_scores for name, r in results.items()},
                            known, curves, tally.stage("faithfulness"))
        results = {name: replace(r, faithfulness=faithful[name]) for name, r in results.items()}
    return Explanation(model.name, tuple(batch.input_ids[0].tolist()), batch.labels[0], units.labels,
                       tuple(int(w) for w in pieces_word(units, len(batch.tokens[0]))), target, score, results,
                       chosen, m.head_importance(grads), done.get("ig"), removable)


def method_results(model: LoadedModel, batch: TokenBatch, units: Units, target: Target, methods: Sequence[str],
                   makers: dict[str, Callable[[], np.ndarray]], pass_seconds: float, known: Known,
                   progress: Progress) -> tuple[dict[str, MethodScores], Known]:
    """Each method's scores per piece and per word and its seconds (the gradient pass counted for those that read
    it); `known` grown by occlusion's copies, for the faithfulness runs to share."""
    word_of_piece = pieces_word(units, len(batch.tokens[0]))
    results = {}
    for name in methods:
        started = time.perf_counter()
        if name == "occlusion":
            words, known = occlusion(model, batch, units, target, known, progress)
            pieces = words[word_of_piece]
        else:
            pieces = makers[name]()
            words = np.bincount(word_of_piece, weights=pieces, minlength=len(units.groups))
        seconds = time.perf_counter() - started + (pass_seconds if name not in ("ig", "occlusion") else 0.0)
        results[name] = MethodScores(name, np.asarray(pieces, dtype=np.float64), words, seconds)
    return results, known


def explain_picture(model: LoadedModel, image: object, asked: str | None, methods: Sequence[str] | None, steps: int,
                    baseline: str, block: int | None) -> ImageExplanation:
    """An image's explanation (vision.py), refusing what only a text's target takes."""
    if asked is not None:
        raise InputError("no_head_for_target", N_("{model} has no head that predicts {answer!r}: its targets are "
                                                  "{targets}."), model=model.name, answer=asked, targets=CLS_COSINE)
    if baseline != ZERO:
        raise InputError("unknown_baseline", N_("Unknown baseline {baseline!r}: choose one of {baselines}."),
                         baseline=baseline, baselines=ZERO)
    return explain_image(model, image, methods, steps, block)


def pieces_word(units: Units, n_pieces: int) -> np.ndarray:
    """(T,) the unit each piece is in."""
    word_of_piece = np.zeros(n_pieces, dtype=int)
    for u, group in enumerate(units.groups):
        word_of_piece[list(group)] = u
    return word_of_piece


def prepared(model: LoadedModel, text: str, answer: str | None, wrong: str | None
             ) -> tuple[TokenBatch, Target, Units]:
    """The text's pieces, its target and its words, refused before any work where the gradients would not fit."""
    check_text_model(model)
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id, keep_mask=True)
    check_gradient_budget(model, 1, batch.input_ids.shape[1])
    return batch, target_for(model, batch, answer, wrong), units_of(batch)


def faithfulness(model: LoadedModel, text: str, word_scores: Sequence[float], answer: str | None = None,
                 wrong: str | None = None, curves: str = SHORT) -> Faithfulness:
    """How faithful any scores of the text's words are (one per word of explain()'s `words`, special pieces
    included) to the target `explain` reads: comprehensiveness and sufficiency at k = 1, 2, 3, 5 words, their AOPC,
    and the deletion and insertion curves at `curves`' k (faithfulness.py)."""
    batch, target, units = prepared(model, text, answer, wrong)
    scores = np.asarray(word_scores, dtype=np.float64)
    if scores.shape != (len(units.groups),):
        raise InputError("word_scores_wrong_length", N_("Give one score per word: the text has {n} words ({words}), "
                                                        "not {given}."), n=len(units.groups),
                         words=" | ".join(units.labels), given=len(scores))
    known = text_known(units, float(edited_scores(model, batch, target, [kept_pieces(units, ())])[0]))
    return measured(model, batch, units, target, {"given": scores}, known, curves)["given"]
