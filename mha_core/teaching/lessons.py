"""Guided exercises: each reveal is computed from the live model, never from a stored answer.

Shapes: L layers, H heads, T tokens.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_core.analysis.heads.display import attention_view, uniform_weight, unit_attention, words_by_default
from mha_core.analysis.heads.roles import head_label, head_roles, metric_title, ranked_heads
from mha_core.analysis.params.shapes import count_shape, make_shape, single_head_equivalent, two_bias_miscount
from mha_core.app_files import ASSETS
from mha_core.engine.forward import run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import tokenize, word_pieces
from mha_core.i18n import Explained, tr
from mha_core.messages import N_
from mha_core.teaching.walkthrough import row_entropy, softmax_at_scale, walkthrough

LESSONS_FILE = ASSETS / "lessons.json"


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
    known_wrong: tuple[tuple[str, str], ...] = ()  # (normalised answer, why it is wrong): a miscount people make

    def why_wrong(self, answer: str) -> str | None:
        """Why `answer` is wrong, where it is a known mistake (the seeds' 1,049,600), else None."""
        return dict(self.known_wrong).get(normalise_answer(answer))


def load_lessons(path: Path = LESSONS_FILE, language: str = "en") -> list[Lesson]:
    """The lessons in `language`: lessons.json in English, lessons.zh.json in Chinese (its own sentences, written for
    the multilingual Gemma 3; the reveal is computed live on any model all the same)."""
    if language != "en":
        path = path.with_name(f"{path.stem}.{language}{path.suffix}")
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


class LessonNotApplicable(Explained):
    """The lesson's premise does not hold on this model (a missing token, layer or head)."""


def token_index(result: AttentionResult, word: str) -> int:
    """The first piece of `word` in the lesson's sentence (AttentionResult.word_pieces, the rule every page uses)."""
    pieces = result.word_pieces(0, word)
    if not pieces:
        raise LessonNotApplicable(
            "sentence_has_no_word", N_("the sentence has no word '{word}' that this model reads"), word=word
        )
    return pieces[0]


def heads_text(heads: list[tuple[int, int]], values: np.ndarray, unit: str) -> str:
    return ", ".join(f"{head_label(layer, head)} ({values[layer, head]:.2f} {unit})" for layer, head in heads)


def reveal_attention_to(model: LoadedModel, lesson: Lesson) -> Reveal:
    """The heads giving the query word the most weight on the key word, in the units the Heads page shows this
    sentence in by default (words for Chinese: 她 → 玛丽, not 她 → 玛)."""
    c = lesson.check
    result = run(model, lesson.sentence, path="explicit")
    view = attention_view(result, 0, merge_words=words_by_default(lesson.sentence))
    token_index(result, c["query"]), token_index(result, c["key"])  # the words are there (else: not applicable)
    weights = unit_attention(view, result, 0, c["query"], c["key"])  # (L,H)
    best = ranked_heads(weights, c["top"])
    query = view.unit_of(result.word_pieces(0, c["query"]))
    uniform = uniform_weight(view, query, result.causal, result.window(best[0][0]))
    unit = tr("of its attention")  # outside the call below: pybabel extract skips a tr() nested in a tr()
    return Reveal(
        tuple(head_label(layer, head) for layer, head in best),
        tr("Live: the heads giving '{query}' → '{key}' the most weight are {heads}; uniform would be {uniform:.3g}.",
           query=c["query"], key=c["key"], heads=heads_text(best, weights, unit),
           uniform=uniform),
    )


def reveal_role(model: LoadedModel, lesson: Lesson) -> Reveal:
    c = lesson.check
    roles = head_roles(run(model, lesson.sentence, path="explicit"))
    values = roles.metrics[c["metric"]]
    qualifying = [(int(layer), int(head)) for layer, head in zip(*np.nonzero(values >= c["min"]), strict=True)]
    best = ranked_heads(values, 3)
    verdict = "" if qualifying else tr(" No head of {model} reaches {min}: on this model the lesson has no right "
                                       "answer.", model=model.name, min=c["min"])
    return Reveal(
        tuple(head_label(layer, head) for layer, head in qualifying),
        tr("Live: mean attention {metric} is ≥ {min} in {count} head(s); the strongest are {heads} (uniform: "
           "{uniform:.2f}).", metric=tr(metric_title(c["metric"], model.causal)), min=c["min"], count=len(qualifying),
           heads=heads_text(best, values, ""), uniform=roles.baselines[c["metric"]]) + verdict,
    )


def reveal_params(model: LoadedModel, lesson: Lesson) -> Reveal:
    c = lesson.check
    multi = make_shape(c["d_model"], c["heads"])
    total, single = count_shape(multi).total, count_shape(single_head_equivalent(multi)).total
    miscount = two_bias_miscount(multi)
    return Reveal(
        (str(total),),
        tr("Counted from real modules: {heads} heads → {total:,} parameters; one head of d_k = {d_model} → "
           "{single:,}. Each head uses a {d_model} × {d_k} slice of the same {d_model} × {d_model} projections: "
           "splitting re-uses, it does not add.", heads=c["heads"], total=total, d_model=c["d_model"], single=single,
           d_k=multi.d_k),
        known_wrong=() if miscount is None else ((str(miscount), tr(
            "{miscount:,} is 4·{d}² + 2·{d}: all four weight matrices but only two of the four bias vectors, as some "
            "tutorials count. Each of W_Q, W_K, W_V and W_O has its own bias of {d}, so the layer has 4·{d}² + 4·{d} "
            "= {total:,} (Parameters page, Any shape).", miscount=miscount, d=c["d_model"], total=total)),),
    )


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
    return Reveal(
        ("sharper", tr("sharper")) if sharper else ("flatter", tr("flatter")),
        tr("Live (layer {layer}, head {head}): entropy {scaled:.2f} nats with 1/√d_k = {scale:.3f}, {unscaled:.2f} "
           "without; top weight {value:.2f} → {value2:.2f}. Unscaled dot products grow with d_k and push softmax "
           "towards one-hot, where gradients vanish.",
           layer=layer, head=head, scaled=row_entropy(scaled), scale=w.scale, unscaled=row_entropy(unscaled),
           value=scaled.max(), value2=unscaled.max()),
    )


def reveal_pair_shift(model: LoadedModel, lesson: Lesson) -> Reveal:
    from mha_core.analysis.coref.sentence import antecedent_scores, sentence_words

    c = lesson.check
    margins = []
    for text, pronoun in ((lesson.sentence, c["pronoun"]), (c["second"], c.get("pronoun2", c["pronoun"]))):
        words = sentence_words(text)
        texts = [w.text.lower() for w in words]
        idx = [texts.index(pronoun), texts.index(c["a"]), texts.index(c["b"])]
        scores = antecedent_scores(run(model, text, path="explicit"), 0, words, idx[0], idx[1:])
        margins.append(scores.margin(0, 1))
    shift = margins[0] - margins[1]  # how far each head moved from a towards b
    best = ranked_heads(shift, c["top"])
    lower = tr("lower")
    return Reveal(
        tuple(head_label(layer, head) for layer, head in best),
        tr("Live: the margin '{a}' − '{b}' drops most in {heads}.", a=c["a"], b=c["b"],
           heads=heads_text(best, shift, lower)),
    )


REVEALS = {
    "attention_to": reveal_attention_to,
    "role": reveal_role,
    "params_heads": reveal_params,
    "scaling": reveal_scaling,
    "pair_shift": reveal_pair_shift,
}


def not_applicable(model: LoadedModel, lesson: Lesson) -> str | None:
    """Why the lesson's premise does not hold on this model (one line), or None when it can be asked; checked
    from the model and its tokenizer alone (no forward), so the page can leave such a lesson out."""
    c = lesson.check
    if (c["kind"] == "role" and c["metric"] == "cls" and not c.get("first_token")
            and getattr(model.tokenizer, "cls_token", None) is None):
        return tr("{name} has no [CLS] token; its first token plays that part (the Roles page labels heads that park "
                  "their attention there)", name=model.name)
    words = [c[name] for name in ("query", "key", "pronoun", "a", "b") if name in c]
    if words:
        batch = tokenize(model.tokenizer, lesson.sentence, model.max_length, model.bos_id)
        missing = [word for word in words if not word_pieces(batch, 0, word)]
        if missing:
            return tr("the sentence has no word '{word}' that {name} reads", word=missing[0], name=model.name)
    return None


def reveal(model: LoadedModel, lesson: Lesson) -> Reveal:
    """The live answer; on a model where the lesson's premise fails, no answer and a sentence saying why."""
    reason = not_applicable(model, lesson)
    if reason is not None:
        return Reveal((), tr("This lesson does not apply to {name}: {reason}.", name=model.name, reason=reason))
    try:
        return REVEALS[lesson.check["kind"]](model, lesson)
    except LessonNotApplicable as err:
        return Reveal(
            (), tr("This lesson was written for {written_for} and does not apply to {name}: {err}.",
                written_for=lesson.written_for, name=model.name, err=err)
        )
