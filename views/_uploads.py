"""Corpus analyses shared by every session (the bundled corpus, uploads, GAP), with their progress bars; and the
media a visitor gives a page (a file, or what the browser's microphone or camera records).

An analysis runs once per server for its key, however many visitors ask at once (the others wait for
it); corpus analyses and single sentences live in separate stores, so typed sentences never evict a
corpus. Uploads are capped: at most UPLOAD_MAX_SENTENCES (mha_core.serving.limits) sentences or examples are
analysed per file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st

from mha_core import LoadedModel, i18n
from mha_core.analysis.coref.gap import CorefResult
from mha_core.analysis.corpus.readers import CorpusFormatError, ParsedSentence, decode_text, read_gap
from mha_core.i18n import tr, worded
from mha_core.messages import N_
from mha_core.serving.computed import corpus as computed_corpus
from mha_core.serving.limits import CORPUS_MAX_PIECES, CORPUS_TEXT_MAX_PIECES, UPLOAD_MAX_SENTENCES
from views._state import queued
from views._text import literal
from views._visit import widget

SHARED_GAP = Path(__file__).resolve().parents[2] / "shared" / "data" / "gap" / "gap-validation.tsv"


def css_string(text: str) -> str:
    """`text` as a CSS string literal (its characters as they are: CSS reads no JSON \\u escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("<", "\\3c ") + '"'


def uploader_words(key: str, types: Sequence[str]) -> None:
    """Streamlit's uploader writes its button ("Upload") and its limit ("20MB per file • TXT") in English whatever
    the page's language, and has no setting for them: on a page in another language, CSS scoped to this uploader's
    key (its element's class st-key-KEY) shows the same texts in that language instead."""
    if i18n.current() == "en":
        return
    limit = tr("{size}MB per file • {types}", size=st.get_option("server.maxUploadSize"),
               types=", ".join(t.upper() for t in types))
    button, zone = css_string(tr("Upload")), f".st-key-{key} [data-testid='stFileUploaderDropzone']"
    st.html(f"<style>{zone} button [data-testid='stMarkdownContainer'] p{{font-size:0}}"
            f"{zone} button [data-testid='stMarkdownContainer'] p::after{{content:{button};"
            f"font-size:0.875rem}}{zone} [data-testid='stFileUploaderDropzoneInstructions'] span{{font-size:0}}"
            f"{zone} [data-testid='stFileUploaderDropzoneInstructions'] span::after{{content:{css_string(limit)};"
            "font-size:0.875rem}</style>")


def parsed_corpus() -> list[ParsedSentence] | None:
    """The bundled corpus parsed by spaCy (once per server, with a progress bar)."""
    return queued(computed_corpus.parsed_corpus_of)


def uploaded_text(label: str, types: list[str], key: str) -> tuple[str, str, str] | None:
    """A file uploader; (cache key from the content, file name, text) once a file of UTF-8 text is given (with
    or without a byte-order mark); another encoding is an error naming the file, and None."""
    uploader_words(key, types)
    upload = st.file_uploader(
        tr(label),
        type=types,
        key=key,
        help=tr(
            "At most {upload_max_sentences:,} sentences or "
            "examples and {corpus_max_pieces:,} word pieces of a "
            "file are analysed; a line over "
            "{corpus_text_max_pieces} word pieces is left out. "
            "UTF-8 text.",
            upload_max_sentences=UPLOAD_MAX_SENTENCES,
            corpus_max_pieces=CORPUS_MAX_PIECES,
            corpus_text_max_pieces=CORPUS_TEXT_MAX_PIECES,
        ),
    )
    if upload is None:
        return None
    raw = upload.getvalue()
    try:
        data = decode_text(raw)
    except CorpusFormatError as err:
        st.error(literal(tr("{name}: {err}.", name=upload.name, err=worded(err))))
        return None
    return f"{key}:{hashlib.sha1(raw).hexdigest()}", upload.name, data


def read_upload(reader: Callable[..., object], name: str, data: str) -> object | None:
    """reader(data, limit) reading one item past the cap (so cap_note can tell); a malformed file is an error
    naming the file and the line, and None."""
    try:
        return reader(data, limit=UPLOAD_MAX_SENTENCES + 1)
    except CorpusFormatError as err:
        st.error(literal(tr("{name}: {err}", name=name, err=worded(err))))
        return None


def capped_upload(
    label: str, types: list[str], key: str, reader: Callable[..., list], prompt: str
) -> tuple[str, list, str] | None:
    """An uploaded corpus file read by `reader`: (cache key, its first UPLOAD_MAX_SENTENCES items, what was left
    out); None, with `prompt` or the file's error shown, until a usable file is given."""
    upload = uploaded_text(label, types, key)
    if upload is None:
        st.info(tr(prompt))
        return None
    cache_key, name, data = upload
    items = read_upload(reader, name, data)
    if items is None:
        return None
    return cache_key, items[:UPLOAD_MAX_SENTENCES], cap_note(len(items))


def cap_note(count: int, unit: str = N_("sentences")) -> str:
    """The sentence a page shows when a file had more than the cap (it is read with limit cap + 1); "" otherwise.
    The progress bar shows the same sentence (views._state.progress_note)."""
    cap = UPLOAD_MAX_SENTENCES
    if count <= cap:
        return ""
    return tr("Only the first {cap:,} {unit} are read; the rest of the file is skipped: uploads are capped.", cap=cap,
              unit=tr(unit))


def gap_source() -> tuple[str, str, str] | None:
    """(cache key, name, TSV text) of an uploaded GAP file, or of the shared GAP validation split when the
    user opts in; None when there is neither."""
    upload = uploaded_text(N_("GAP TSV file"), ["tsv", "txt"], "gap_upload")
    if upload is not None:
        return upload
    if SHARED_GAP.exists() and widget(st.toggle, "gap_local", False,
                                      tr("Use {name} found beside the project", name=SHARED_GAP.name)):
        return f"gap:{SHARED_GAP}", SHARED_GAP.name, SHARED_GAP.read_text(encoding="utf-8")
    return None


def gap_analysis(model: LoadedModel) -> CorefResult | None:
    """Coreference heads on a GAP file (computed once per file and model, with a progress bar). The result is
    also kept in the session so the other pages can mark these heads."""
    source = gap_source()
    earlier = st.session_state.get("gap_results", {}).get(str(model.model_dir))
    if source is None and earlier is not None:
        st.caption(tr("Showing the GAP analysis computed earlier in this session."))
        return earlier
    if source is None:
        st.info(
            tr(
                "Upload a GAP TSV file (columns ID, Text, Pronoun, Pronoun-offset, A, A-offset, A-coref, B, "
                "B-offset, B-coref, URL) to find the heads that link pronouns to their antecedents."
            )
        )
        return None
    key, name, data = source
    rows = read_upload(read_gap, name, data)
    if rows is None:
        return None
    examples = rows.examples[:UPLOAD_MAX_SENTENCES]
    result = queued(computed_corpus.gap_analysis_of, model, key, examples,
                    note=cap_note(len(rows.examples), unit=N_("examples")))
    if result is None:
        return None
    if rows.misaligned:
        st.caption(
            tr(
                "{misaligned:,} row(s) skipped: their offsets do not point at the names they give.",
                misaligned=rows.misaligned,
            )
        )
    result = result.counting(rows)
    st.session_state.setdefault("gap_results", {})[str(model.model_dir)] = result
    return result


def media_bytes(upload: tuple[str, list[str], str] | None, capture: tuple[Callable, str, str, str] | None
                ) -> bytes | None:
    """A file the visitor uploads (label, types, key), or what the browser records (st.audio_input or
    st.camera_input, its label, key, and what to say while nothing is recorded: a refused device among the causes)."""
    if upload is not None:
        label, types, key = upload
        uploader_words(key, types)
        file = st.file_uploader(label, type=types, key=key)
        return None if file is None else file.getvalue()
    draw, label, key, missing = capture
    recorded = draw(label, key=key)
    if recorded is None:
        st.caption(missing)
    return None if recorded is None else recorded.getvalue()
