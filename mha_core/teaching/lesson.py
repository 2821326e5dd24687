"""The lesson (issue 47): the seed texts' topics in their order, one step each: a title, two or three sentences, the
model the step reads and the page where it is explored further (by its name in mha_core.serving.pages). The views
are the pages' own parts (views/parts/, which views/lesson.py draws each step with); the words here are in English,
marked for the catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass

from mha_core.engine.loading.bundled import GEMMA_NAME, VISION_NAME, WHISPER_NAME
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

CLASS_MODEL = None  # a step on the class's text model: the one chosen in the sidebar (Chinese: Gemma 3)


@dataclass(frozen=True)
class LessonStep:
    key: str  # the view it shows (views/lesson.py's STEP_VIEWS)
    title: str
    text: str  # two or three sentences in the page's language (marked here, translated there)
    model: str | None  # the bundled model it reads, or CLASS_MODEL
    page: str  # the name of the page "Explore this on its page" goes to (mha_core.serving.pages declares it; the
    # link carries the lesson's sentence and model)


STEPS = (
    LessonStep("why", N_("Why attention: one word looks at all the others"),
               N_("A word's meaning depends on the words around it. Attention lets each word take a weighted mix "
                  "of every other word; the bars are one word's weights, one row of the attention map, and they add "
                  "up to 1."), CLASS_MODEL, "heads"),
    LessonStep("four_steps", N_("One head in four steps"),
               N_("Each word is projected into a query, a key and a value. Scores are query · key divided by √d_k, "
                  "softmax turns each row into weights, and the weights mix the values. Below, the scores and the "
                  "softmax of one head, on the model's real tensors."), CLASS_MODEL, "walkthrough"),
    LessonStep("heads", N_("Why several heads: every head at a glance"),
               N_("The model runs many heads side by side, each with its own small projections, so each can look for "
                  "something different. Every tile is one head's map of the same sentence: some look back one word, "
                  "some at the start, some at related words."), CLASS_MODEL, "heads"),
    LessonStep("parameters", N_("Parameters: what multi-head attention costs in weights"),
               N_("With d_model = 512 and h = 8 heads of d_k = 64, the four projections hold 4 · 512 · 512 weights "
                  "plus biases: splitting into heads adds none. Below, one wide head against eight narrow ones, "
                  "counted from real modules, and this model's own count."), CLASS_MODEL, "parameters"),
    LessonStep("roles", N_("What heads learn"),
               N_("Clark et al. (2019) found heads that attend to the previous word, to [CLS] or [SEP], or follow "
                  "syntax. The grid labels each head of this model by what it does most on this sentence, against "
                  "what a head spreading its weight evenly would do."), CLASS_MODEL, "roles"),
    LessonStep("coreference", N_("Pronouns: heads that resolve what a pronoun means"),
               N_("Some heads link a pronoun to the noun it stands for. A minimal pair changes one word so that the "
                  "pronoun should mean the other noun: its grid shows which heads follow the meaning."),
               CLASS_MODEL, "coreference"),
    LessonStep("explanation", N_("Is attention the explanation?"),
               N_("A head that looks at a word does not show that the answer needs it. Beside one head's attention, "
                  "two other measures of what the answer depends on: input × gradient (each word's embedding times "
                  "the answer's gradient, one pass back) and occlusion (the model run again without each word, "
                  "exact). Where they disagree, attention is not the explanation."), CLASS_MODEL,
               "explanations"),
    LessonStep("cross", N_("Cross-attention: the decoder reads the encoder"),
               N_("In an encoder–decoder, the decoder's queries read the encoder's keys and values. Whisper hears the "
                  "class's sentence spoken by espeak-ng: each written word listens to a stretch of the audio."),
               WHISPER_NAME, "seq2seq"),
    LessonStep("translation", N_("Translation: attention as alignment"),
               N_("Attention began in translation (Bahdanau et al.): each translated word looks back at the source "
                  "words it comes from. Gemma 3 translates the "
                  "class's sentence, and its heads align the two languages."),
               GEMMA_NAME, "translation"),
    LessonStep("images", N_("Images: an image is worth 16 × 16 words"),
               N_("A Vision Transformer cuts the image into patches and treats them as words. The [CLS] token's "
                  "attention, drawn as light on the photo, shows what each head looks at."), VISION_NAME,
               "images"),
    LessonStep("cost", N_("The cost: attention grows with n²"),
               N_("In full attention every word attends to every word, so time and memory grow with the square of the "
                  "length. A decoder keeps its keys and values (the KV cache) so that each new word costs one row; "
                  "sparse and linear attention cut the square."), CLASS_MODEL, "efficiency"),
)


def checked_step(step: object) -> int:
    """A step number of the lesson (1 to the last), refused in one sentence otherwise: 0, a fraction, a bool, None
    or a number past SQLite's integers (the class store keeps what this lets through)."""
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= len(STEPS):
        raise InputError("no_such_step", N_("The lesson has steps 1 to {last}, not {number}."), last=len(STEPS),
                         number=str(step) if len(str(step)) <= 20 else f"{str(step)[:20]}…")
    return step


def step_number(key: str) -> int:
    """The number of the step showing view `key` (counted from 1)."""
    return next(number for number, step in enumerate(STEPS, start=1) if step.key == key)


def step_at(number: int) -> LessonStep:
    """Step `number`, counted from 1."""
    return STEPS[checked_step(number) - 1]
