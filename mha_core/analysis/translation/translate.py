"""Translate with a decoder (the few-shot prompt, greedy) and read the translation's alignment to its source from
the model's own attention; or align a translation someone gives (forced alignment).

Shapes: S source words, T target words.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.analysis.lm.generate import generate
from mha_core.analysis.lm.head import check_next_piece_head
from mha_core.analysis.translation.align import ReadPair, WordMaps, links_of, read_pair
from mha_core.analysis.translation.both_ways import CANONICAL, both_ways, turned
from mha_core.analysis.translation.choices import METHODS
from mha_core.analysis.translation.chosen import method_choices
from mha_core.analysis.translation.gold import Links, pharaoh
from mha_core.analysis.translation.heads import Progress, head_choice
from mha_core.analysis.translation.prompt import EXAMPLE_PAIRS, check_pair, prompt_for
from mha_core.analysis.translation.run import word_maps
from mha_core.analysis.translation.words import LANGUAGES, split_words
from mha_core.engine.drawable import Drawable
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.pieces import fragmented_chars, unknown_spans
from mha_core.engine.tokens import InputError, is_wide
from mha_core.engine.words import simplified
from mha_core.messages import N_, Worded

MAX_NEW = 64  # pieces a translation may take (generate.MAX_NEW)


@dataclass(frozen=True)
class Translation(Drawable):
    source: str
    translation: str  # written by the model, or given (forced alignment)
    source_language: str
    target_language: str
    source_words: tuple[str, ...]  # S
    target_words: tuple[str, ...]  # T
    links: Links  # (source word, target word), 0-based
    heads: tuple[tuple[int, int], ...]  # the heads whose mean map gives the links
    matrix: np.ndarray  # (T,S) that mean map
    maps: WordMaps  # every head's (L,H,T,S)
    generated: bool  # the model wrote the translation
    rule: str = "argmax"  # how the links were read from `matrix` (align.links_of; a method's rule, methods.py)
    scaling: str = "plain"  # how `matrix` and `maps` were scaled (align.SCALINGS)
    method: str = "heads"  # methods.METHODS: what `matrix` holds (weights, similarity, probability) and links

    @property
    def prompt(self) -> str:
        return self.maps.prompt

    @property
    def simplified_translation(self) -> str:
        """A Chinese translation in Simplified characters (the model may write Traditional ones: 牠 → 它, 為 → 为)."""
        return simplified(self.translation) if self.target_language == "zh" else self.translation

    def aligned_to(self, target_word: int) -> list[int]:
        return sorted(s for s, t in self.links if t == target_word)

    def aligned_from(self, source_word: int) -> list[int]:
        return sorted(t for s, t in self.links if s == source_word)

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "source": self.source, "translation": self.translation,
                "source_language": self.source_language, "target_language": self.target_language,
                "source_words": list(self.source_words), "target_words": list(self.target_words),
                "alignment": pharaoh(self.links).split(), "heads": [list(h) for h in self.heads],
                "prompt": self.prompt, "generated": self.generated, "rule": self.rule, "method": self.method}


@dataclass(frozen=True)
class PronounLink:
    """A pronoun of one sentence and the words of the other it is linked to (none: nothing links it)."""

    in_source: bool  # the pronoun is the source's (else the translation's)
    word: str
    linked: tuple[str, ...]  # the other sentence's words, in order
    to_pronoun: bool  # one of them is a pronoun: the pronoun carried across languages


def pronoun_links(result: Translation, pronouns: Mapping[str, Collection[str]]) -> tuple[PronounLink, ...]:
    """The translation's pronouns and what each is linked to, then the source's pronouns that no pronoun of the
    translation is linked to (an "it" left without a link is said, not hidden)."""
    is_pronoun = lambda word, language: word.lower() in pronouns[language]  # noqa: E731
    found, covered = [], set()
    for t, word in enumerate(result.target_words):
        if is_pronoun(word, result.target_language):
            sources = result.aligned_to(t)
            covered.update(sources)
            linked = tuple(result.source_words[s] for s in sources)
            found.append(PronounLink(False, word, linked, any(is_pronoun(w, result.source_language) for w in linked)))
    for s, word in enumerate(result.source_words):
        if is_pronoun(word, result.source_language) and s not in covered:
            linked = tuple(result.target_words[t] for t in result.aligned_from(s))
            found.append(PronounLink(True, word, linked, any(is_pronoun(w, result.target_language) for w in linked)))
    return tuple(found)


def check_reads(model: LoadedModel, text: str, language: str) -> None:
    """Refuse a language the model reads only as bytes or unknown pieces (SmolLM2's Chinese, a BERT vocabulary's),
    naming them: `text`, and the prompt's own example in that language (a model that cannot write it cannot
    translate into it). The characters named are the sentence's own, in its order (the example's only when the
    sentence has none of them)."""
    if language != "zh":
        return
    read = text + EXAMPLE_PAIRS[0][language]
    encoded = model.tokenizer(read, return_offsets_mapping=True, add_special_tokens=False)
    offsets = encoded["offset_mapping"]
    unknown = unknown_spans(read, [i == model.tokenizer.unk_token_id for i in encoded["input_ids"]], offsets)
    split = sorted(fragmented_chars(read, offsets))
    wide = {c for c in read if is_wide(c)}
    if unknown or len(split) > len(wide) / 2:
        found = list(dict.fromkeys(unknown or split))
        named = sorted((f for f in found if f in text), key=text.find) or sorted(found, key=read.find)
        raise InputError("language_not_read", N_("{model} does not read {language}: it reads {chars} as unknown or "
                                                 "byte pieces; choose a model that reads it (Gemma 3)."),
                         model=model.name, language=Worded(LANGUAGES[language]), chars=" ".join(named[:6]))


def aligned(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str,
            target_language: str, generated: bool, progress: Progress | None = None,
            method: str = "heads") -> Translation:
    if method != "heads":
        return aligned_both_ways(model, source, target, source_language, target_language, generated, progress, method)
    choice = head_choice(model, source_language, target_language, progress)
    maps = word_maps(model, source, target, source_language, target_language, choice.rows,
                     choice.pooling).scaled(choice.scaling)
    matrix = maps.combined(choice.heads)
    links = links_of(matrix, choice.rule, maps.allowed())
    return Translation(as_text(source, source_language), as_text(target, target_language), source_language,
                       target_language, maps.source_words, maps.target_words, links,
                       choice.heads, matrix, maps, generated, choice.rule, choice.scaling)


def as_text(sentence: str | Sequence[str], language: str) -> str:
    return sentence if isinstance(sentence, str) else ("" if language == "zh" else " ").join(sentence)


def aligned_both_ways(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str],
                      source_language: str, target_language: str, generated: bool, progress: Progress | None,
                      method: str) -> Translation:
    """A both-ways method's links (methods.py), turned to the order asked; `maps` the asked direction's heads."""
    choice = method_choices(model, progress).of(method)
    ways = both_ways(model, source, target, source_language, target_language, (choice.pooling,))
    links, matrix = choice.links(ways)
    if (source_language, target_language) != CANONICAL:
        links, matrix = turned(links), matrix.T
    direction = f"{source_language}-{target_language}"
    run = ways.runs[direction]
    heads = tuple((layer, head) for d, _, layer, head in getattr(choice, "heads", ()) if d == direction)
    rule = getattr(choice, "rule", getattr(choice, "matching", ""))
    return Translation(as_text(source, source_language), as_text(target, target_language), source_language,
                       target_language, run.source_words, run.target_words, links, heads, matrix,
                       run.word_maps("self", choice.pooling), generated, rule, "columns", method)


def check_method(method: str) -> str:
    if method not in METHODS:
        raise InputError("unknown_alignment_method", N_("Alignment methods are {methods}, not {given!r}."),
                         methods=", ".join(METHODS), given=str(method)[:20])
    return method


@torch.inference_mode()
def translate(model: LoadedModel, text: str, source_language: str = "zh", target_language: str = "en",
              progress: Progress | None = None, method: str = "heads") -> Translation:
    """The model's own translation of `text` (greedy, the few-shot prompt of prompt.py), aligned word by word."""
    check_next_piece_head(model)
    check_pair(source_language, target_language)
    check_method(method)
    source_words = split_words(text, source_language)
    check_reads(model, text, source_language)
    check_reads(model, "", target_language)
    prompted = prompt_for(source_words, source_language, target_language)
    line_ends = {i for s in ("\n", "\n\n") for i in model.tokenizer(s, add_special_tokens=False)["input_ids"]}
    written = generate(model, prompted.text, new=MAX_NEW, stop_pieces=sorted(line_ends),
                       start=prompted.text[:prompted.examples_end]).continuation
    translation = written.split("\n")[0].strip()
    if not translation:
        raise InputError("no_translation_written", N_("{model} wrote no translation of this sentence."),
                         model=model.name)
    return aligned(model, text, translation, source_language, target_language, True, progress, method)


def alignable(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str = "zh",
              target_language: str = "en") -> ReadPair:
    """The pair as the model reads it, after every refusal `align` makes, without its forward (the CLI checks a file's
    every pair before it aligns the first)."""
    check_next_piece_head(model)
    check_pair(source_language, target_language)
    for x, language in ((source, source_language), (target, target_language)):
        check_reads(model, "".join(split_words(x, language) if isinstance(x, str) else x), language)
    return read_pair(model, source, target, source_language, target_language)


@torch.inference_mode()
def align(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str = "zh",
          target_language: str = "en", progress: Progress | None = None, method: str = "heads") -> Translation:
    """Forced alignment: `target` (a translation someone gives) read as the model's continuation of the prompt, and
    its words linked to the source's. A sentence is a text or its words (a list, or words split by spaces)."""
    check_method(method)
    alignable(model, source, target, source_language, target_language)
    return aligned(model, source, target, source_language, target_language, False, progress, method)
