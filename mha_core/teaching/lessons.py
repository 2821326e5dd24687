"""Guided exercises: each reveal is computed from the live model, never from a stored answer.

Shapes: L layers, H heads, T tokens.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_core.analysis.roles import METRIC_TITLES, head_label, head_roles, ranked_heads
from mha_core.analysis.shapes import count_shape, make_shape, single_head_equivalent
from mha_core.engine.forward import run
from mha_core.engine.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import tokenize, word_pieces
from mha_core.teaching.walkthrough import row_entropy, softmax_at_scale, walkthrough

LESSONS_FILE = Path(__file__).resolve().parents[2] / "assets" / "lessons.json"


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    sentence: str
    question: str
    hint: str
    check: dict
    written_for: str  # the model the lesson's question was written for; answers come from the live model


@dataclass(frozen=True)
class Reveal:
    accepted: tuple[str, ...]  # answers that count as right, normalised ("L3 H1", "1050624", "sharper")
    explanation: str  # markdown, with the live numbers


def load_lessons(path: Path = LESSONS_FILE) -> list[Lesson]:
    return [Lesson(**item) for item in json.loads(path.read_text(encoding="utf-8"))]


def normalise_answer(text: str) -> str:
    """'layer 3, head 1' / 'L3H1' / '3 1' -> 'L3 H1'; numbers lose separators; words lower-cased."""
    numbers = re.findall(r"\d+", text)
    if len(numbers) == 2 and re.search(r"[lL]|layer|head|,|\s", text):
        return head_label(int(numbers[0]), int(numbers[1]))
    if numbers and re.fullmatch(r"[\d,\s_.']+", text.strip()):
        return "".join(numbers)
    return text.strip().lower()


def is_right(reveal: Reveal, answer: str) -> bool:
    return normalise_answer(answer) in reveal.accepted


class LessonNotApplicable(ValueError):
    """The lesson's premise does not hold on this model (a missing token, layer or head)."""


def token_index(result: AttentionResult, word: str) -> int:
    """The first piece of `word` in the lesson's sentence (AttentionResult.word_pieces, the rule every page uses)."""
    pieces = result.word_pieces(0, word)
    if not pieces:
        raise LessonNotApplicable(f"the sentence has no word '{word}' that this model reads")
    return pieces[0]


def heads_text(heads: list[tuple[int, int]], values: np.ndarray, unit: str) -> str:
    return ", ".join(f"{head_label(layer, head)} ({values[layer, head]:.2f} {unit})" for layer, head in heads)


def reveal_attention_to(model: LoadedModel, lesson: Lesson) -> Reveal:
    c = lesson.check
    result = run(model, lesson.sentence, path="explicit")
    maps = result.text_attention(0)  # (L,H,T,T)
    weights = maps[:, :, token_index(result, c["query"]), token_index(result, c["key"])]
    best = ranked_heads(weights, c["top"])
    return Reveal(tuple(head_label(layer, head) for layer, head in best),
                  f"Live: the heads giving '{c['query']}' → '{c['key']}' the most weight are "
                  f"{heads_text(best, weights, 'of its attention')}; uniform would be {1 / maps.shape[-1]:.2f}.")


def reveal_role(model: LoadedModel, lesson: Lesson) -> Reveal:
    c = lesson.check
    roles = head_roles(run(model, lesson.sentence, path="explicit"))
    values = roles.metrics[c["metric"]]
    qualifying = [(int(layer), int(head)) for layer, head in zip(*np.nonzero(values >= c["min"]), strict=True)]
    best = ranked_heads(values, 3)
    verdict = ("" if qualifying else f" No head of {model.name} reaches {c['min']}: on this model the lesson has no "
               "right answer.")
    return Reveal(tuple(head_label(layer, head) for layer, head in qualifying),
                  f"Live: mean attention {METRIC_TITLES[c['metric']]} is ≥ {c['min']} in {len(qualifying)} head(s); "
                  f"the strongest are {heads_text(best, values, '')} (uniform: {roles.baselines[c['metric']]:.2f})."
                  + verdict)


def reveal_params(model: LoadedModel, lesson: Lesson) -> Reveal:
    c = lesson.check
    multi = make_shape(c["d_model"], c["heads"])
    total, single = count_shape(multi).total, count_shape(single_head_equivalent(multi)).total
    return Reveal((str(total),),
                  f"Counted from real modules: {c['heads']} heads → {total:,} parameters; one head of "
                  f"d_k = {c['d_model']} → {single:,}. Each head uses a {c['d_model']} × {multi.d_k} slice of "
                  f"the same {c['d_model']} × {c['d_model']} projections: splitting re-uses, it does not add.")


def reveal_scaling(model: LoadedModel, lesson: Lesson) -> Reveal:
    c = lesson.check
    result = run(model, lesson.sentence, path="explicit")
    layer, head = c["layer"], c["head"]
    if layer >= model.n_layers or head >= model.n_heads:  # written for another shape: the middle layer, head 0
        layer, head = model.n_layers // 2, 0
    w = walkthrough(model, result, layer, head)
    query = token_index(result, c["query"])
    row = w.raw_scores[query]
    scaled, unscaled = softmax_at_scale(row, w.scale, w.visible[query]), softmax_at_scale(row, 1.0, w.visible[query])
    sharper = row_entropy(unscaled) < row_entropy(scaled)
    return Reveal(("sharper",) if sharper else ("flatter",),
                  f"Live (layer {layer}, head {head}): entropy {row_entropy(scaled):.2f} nats with 1/√d_k = "
                  f"{w.scale:.3f}, {row_entropy(unscaled):.2f} without; top weight {scaled.max():.2f} → "
                  f"{unscaled.max():.2f}. "
                  "Unscaled dot products grow with d_k and push softmax towards one-hot, where gradients vanish.")


def reveal_pair_shift(model: LoadedModel, lesson: Lesson) -> Reveal:
    from mha_core.analysis.inspector import antecedent_scores, sentence_words

    c = lesson.check
    margins = []
    for text in (lesson.sentence, c["second"]):
        words = sentence_words(text)
        texts = [w.text.lower() for w in words]
        idx = [texts.index(c["pronoun"]), texts.index(c["a"]), texts.index(c["b"])]
        scores = antecedent_scores(run(model, text, path="explicit"), 0, words, idx[0], idx[1:])
        margins.append(scores.margin(0, 1))
    shift = margins[0] - margins[1]  # how far each head moved from a towards b
    best = ranked_heads(shift, c["top"])
    return Reveal(tuple(head_label(layer, head) for layer, head in best),
                  f"Live: the margin '{c['a']}' − '{c['b']}' drops most in {heads_text(best, shift, 'lower')}.")


REVEALS = {"attention_to": reveal_attention_to, "role": reveal_role, "params_heads": reveal_params,
           "scaling": reveal_scaling, "pair_shift": reveal_pair_shift}


def not_applicable(model: LoadedModel, lesson: Lesson) -> str | None:
    """Why the lesson's premise does not hold on this model (one line), or None when it can be asked; checked
    from the model and its tokenizer alone (no forward), so the page can leave such a lesson out."""
    c = lesson.check
    if c["kind"] == "role" and c["metric"] == "cls" and getattr(model.tokenizer, "cls_token", None) is None:
        return (f"{model.name} has no [CLS] token; its first token plays that part (the Roles page labels heads "
                "that park their attention there)")
    words = [c[name] for name in ("query", "key", "pronoun", "a", "b") if name in c]
    if words:
        batch = tokenize(model.tokenizer, lesson.sentence, model.max_length, model.bos_id)
        missing = [word for word in words if not word_pieces(batch, 0, word)]
        if missing:
            return f"the sentence has no word '{missing[0]}' that {model.name} reads"
    return None


def reveal(model: LoadedModel, lesson: Lesson) -> Reveal:
    """The live answer; on a model where the lesson's premise fails, no answer and a sentence saying why."""
    reason = not_applicable(model, lesson)
    if reason is not None:
        return Reveal((), f"This lesson does not apply to {model.name}: {reason}.")
    try:
        return REVEALS[lesson.check["kind"]](model, lesson)
    except LessonNotApplicable as err:
        return Reveal((), f"This lesson was written for {lesson.written_for} and does not apply to {model.name}: "
                          f"{err}.")
