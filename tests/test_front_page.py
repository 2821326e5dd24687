"""Issue 79: the front page fits one screen's reading (README.md at most 150 lines; the rest is the docs site), links
to its Chinese twin at the top, and every relative link or image of README.md and README.zh.md names a file that
exists (the screenshots the browser tier takes included)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

FRONT_PAGES = ("README.md", "README.zh.md")
MAX_LINES = 150
LINK = re.compile(r"\]\(([^)\s]+)\)|\bsrc=\"([^\"]+)\"")  # markdown links and images, HTML images
PICTURES = ("docs/img/lesson-projector.png", "docs/img/phone-following.png")


def relative_targets(text: str) -> list[str]:
    """The file each relative link or image names (an #anchor dropped; web addresses left out)."""
    targets = [markdown or html for markdown, html in LINK.findall(text)]
    return [target.split("#")[0] for target in targets if not re.match(r"[a-z]+:|#", target)]


def test_the_front_page_fits_in_150_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, len(lines)


@pytest.mark.parametrize("name", FRONT_PAGES)
def test_every_relative_link_and_image_of_a_front_page_exists(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    targets = relative_targets(text)
    assert set(PICTURES) <= set(targets), "both screenshots are shown"
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, missing


def test_each_front_page_links_to_the_other_at_the_top():
    for name, other in zip(FRONT_PAGES, reversed(FRONT_PAGES), strict=True):
        top = "\n".join((ROOT / name).read_text(encoding="utf-8").splitlines()[:5])
        assert f"]({other})" in top, name


def test_links_are_read_from_markdown_and_html():
    assert relative_targets("[a](docs/a.md#x) ![b](img/b.png) <img src=\"c.png\"> [d](https://e.org) [f](#g)") == [
        "docs/a.md", "img/b.png", "c.png"]
