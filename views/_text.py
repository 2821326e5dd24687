"""User and model text on a page: whatever a visitor typed or a model wrote is shown as itself (no markdown, links,
HTML or LaTeX of its own), line by line."""

from __future__ import annotations

from mha_core.messages import visible

MARKDOWN_SPECIALS = set("\\`*_{}[]()#+-.!|~$:<>&")
# GFM autolinks bare addresses even when their punctuation is escaped: a zero-width space breaks each
# pattern (www., scheme://, the @ of an e-mail address) without changing what a reader sees.
AUTOLINK_BREAKS = (("www.", "ww\u200bw."), ("WWW.", "WW\u200bW."), ("://", ":\u200b//"), ("@", "\u200b@"))


def literal(text: str) -> str:
    """User text (a sentence, a token, a file name, a message quoting them) for any element that renders
    markdown: emphasis, links, HTML, LaTeX and Streamlit's colour and icon directives stay literal, and
    bare web and e-mail addresses are not turned into links; a character that is invisible or turns the line round
    is shown as its code (mha_core.messages.INVISIBLE)."""
    text = visible(text)
    for pattern, broken in AUTOLINK_BREAKS:
        text = text.replace(pattern, broken)
    return "".join("\\" + c if c in MARKDOWN_SPECIALS else c for c in text)


def one_line(text: str) -> str:
    """User text shown in one line of markdown (a caption, a label): its line breaks and runs of spaces as single
    spaces (a line indented by four spaces would show as a code block), then literal."""
    return literal(" ".join(text.split()))


def literal_lines(text: str) -> str:
    """User or model text of several lines for markdown: each line literal, its line breaks kept."""
    return "  \n".join(literal(line) for line in text.split("\n"))


def emphasised(text: str) -> str:
    """Model text in bold, line by line (bold marks cannot span a blank line: they would show as **)."""
    return "  \n".join(f"**{literal(line.strip())}**" if line.strip() else "" for line in text.split("\n"))
