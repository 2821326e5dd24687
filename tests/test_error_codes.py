"""Issue 45: an error's code is public API (a notebook or a script branches on `err.code`): each names what went
wrong in a few words of its own, one code one meaning, and the docs list every one with its sentence
(docs/developers/error-codes.md). About half of them used to be slugs cut from the sentence
("has_no_language_model_2", "s_tokenizer_has_no")."""

from __future__ import annotations

import re
from collections import defaultdict

from tests.conftest import ROOT
from tests.error_codes import error_codes

ARTICLES = {"the", "a", "an", "of", "to"}
DANGLING = {"could", "must", "be", "vs", "it", "pick", "not", "no", "but", "another", "at", "most", "beyond", "only",
            "after", "choose", "than", "that", "has", "have", "is", "are", "from", "with", "for", "and", "or",
            "where", "here", "s", "its", "as", "by", "in", "on", "every", "own"}
ONE_LETTER = {"a", "d", "k"}  # not_a_pair, d_model, top_k


def cut_from_sentence(code: str, template: str) -> bool:
    """The code is its sentence's first four or more words (placeholders and articles left out)."""
    words = [w for w in re.findall(r"[a-z0-9]+", re.sub(r"\{[^}]*\}", "", template.lower())) if w not in ARTICLES]
    return any(code == "_".join(words[:k]) for k in range(4, len(words) + 1))


def unreadable(code: str, template: str) -> str | None:
    parts = code.split("_")
    if not re.fullmatch(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*", code):
        return "not snake_case"
    if re.search(r"_\d+$", code):
        return "a number to tell it from another"
    if any(len(part) == 1 and part not in ONE_LETTER for part in parts):
        return "a one-letter word"
    if parts[-1] in DANGLING or len(parts) > 5:
        return "a sentence cut off"
    if cut_from_sentence(code, template):
        return "the sentence's first words"
    return None


def test_every_code_is_readable_and_means_one_thing():
    found = error_codes()
    assert len(found) > 100  # the scan sees the codes (constructors and folder.refused)
    bad = {code: why for code, template, _ in found if (why := unreadable(code, template))}
    assert not bad, bad
    meanings = defaultdict(set)
    for code, template, _ in found:
        meanings[code].add(template)
    assert not {code: t for code, t in meanings.items() if len(t) > 1}, "one code, one sentence"


def test_the_rules_catch_the_old_slugs():
    old = {"has_no_language_model_2": "{name} has no language-model head (it predicts no piece).",
           "s_tokenizer_has_no": "{name}'s tokenizer has no chat template: generate without it.",
           "none_gap_examples_could": "None of the {examples:,} GAP examples could be scored.",
           "has_no_layers_ablate": "{name} has no layers to ablate.",
           "line_expected_tab_separated_2": "line {number}: expected 11 tab-separated GAP columns, found {row}"}
    assert all(unreadable(code, template) for code, template in old.items())
    assert unreadable("no_text_given", "No text given.") is None


def test_the_docs_list_every_code_with_its_sentence():
    section = (ROOT / "docs" / "developers" / "error-codes.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([a-z0-9_]+)` \| (.+?) \|", section, flags=re.M))
    codes = {code: template for code, template, _ in error_codes()}
    assert set(listed) == set(codes), (set(codes) - set(listed), set(listed) - set(codes))
    for code, template in codes.items():
        assert listed[code] == template.replace("|", "\\|"), code
