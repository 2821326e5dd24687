"""Issue 10, the careless or hostile visitor: every input that once broke something, at the unit level.

Each test names the row of the issue's table it covers. The pages and the browser are in
test_hostile_pages.py and test_browser_pages.py; these run in seconds on tiny random models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mha_core import InputError, ModelLoadError, load_model
from mha_core.analysis.corpus.readers import CorpusFormatError, ParsedSentence, parse_conllu, read_gap
from mha_core.analysis.corpus.syntax import analyse_syntax
from mha_core.analysis.params.shapes import MAX_DIM, make_shape, projection_flops, score_flops
from mha_core.figures.params import flops_figure, kv_cache_figure, memory_figure
from mha_core.figures.spec import array_of
from tests.conftest import CliRun, cli

GAP_HEADER = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n"
BAD_FOLDER_MESSAGES = {
    "config-list": "not a JSON object", "config-null": "not a JSON object", "config-string": "not a JSON object",
    "config-broken": "not valid JSON", "unknown-type": "Unsupported architecture 'pegasus'",
    "garbage-weights": "safetensors weights", "sizes-mismatch": "do not match the sizes",
    "no-tokenizer": "No tokenizer", "custom-code": "needs its own code .trust_remote_code., which is never run",
}


def one_line_exit_2(proc: CliRun, message: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


# -- model folders (rows: ~nosuchuser, 5,000-character path, config.json not an object, garbage weights,
#    sizes that do not match, no tokenizer) ---------------------------------------------------------------
@pytest.mark.parametrize(("path", "message"), [("~nosuchuser/model", "Cannot expand the home directory"),
                                               ("x" * 5000, "File name too long")])
def test_unusable_paths_are_one_sentence(path, message):
    with pytest.raises(ModelLoadError, match=message) as err:
        load_model(path)
    assert len(str(err.value)) < 200  # the 5,000 characters are not echoed back


@pytest.mark.parametrize("name", sorted(BAD_FOLDER_MESSAGES))
def test_bad_model_folders_are_one_sentence(bad_model_dirs, name):
    with pytest.raises(ModelLoadError, match=BAD_FOLDER_MESSAGES[name]) as err:
        load_model(bad_model_dirs[name])
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_cli_bad_model_folders_exit_2_with_one_line(bad_model_dirs):
    for name in ("config-list", "garbage-weights", "sizes-mismatch", "no-tokenizer"):
        one_line_exit_2(cli("attention", "hi there", "--model-dir", str(bad_model_dirs[name])),
                        BAD_FOLDER_MESSAGES[name])
    one_line_exit_2(cli("attention", "hi", "--model-dir", "~nosuchuser"), "Cannot expand the home directory")


# -- corpora (rows: sentences over 512 pieces, HEAD beyond the sentence / cycles, GAP without usable rows,
#    GAP offsets that do not point at the mention) ----------------------------------------------------------
def conllu(*rows: tuple[int, str, int, str]) -> list[str]:
    return [f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{rel}\t_\t_" for i, form, head, rel in rows]


@pytest.mark.parametrize(("rows", "message"), [
    (((1, "a", 0, "root"), (2, "b", 7, "dep")), "line 2: HEAD 7 lies outside its sentence of 2 words"),
    (((1, "a", 2, "dep"), (2, "b", 1, "dep"), (3, "c", 0, "root")), "line 1: the HEADs from word 1 form a cycle"),
    (((1, "a", 0, "root"), (2, "b", 0, "root")), "line 1: the sentence starting here has 2 roots"),
    (((1, "a", 2, "dep"), (2, "b", 1, "dep")), "line 1: the sentence starting here has 0 roots"),
    (((1, "a", 0, "root"), (3, "b", 1, "dep")), "line 2: word ID 3 where 2 was expected"),
])
def test_conllu_trees_are_validated_naming_the_line(rows, message):
    with pytest.raises(CorpusFormatError, match=message):
        parse_conllu(conllu(*rows))


def test_a_corpus_of_only_overlong_sentences_is_a_message(tiny):
    words = tuple(f"word{i}" for i in range(tiny.max_length + 5))
    long_sentence = ParsedSentence(words, (0,) + (1,) * (len(words) - 1), ("root",) + ("dep",) * (len(words) - 1))
    with pytest.raises(InputError, match=f"None of the 2 sentences fits the model's {tiny.max_length} word pieces"):
        analyse_syntax(tiny, [long_sentence, long_sentence])


AMBIGUOUS_GAP = GAP_HEADER + "d-1\tAnn met Bo. She left.\tShe\t12\tAnn\t0\tTRUE\tBo\t8\tTRUE\tu\n"


def test_gap_without_usable_rows_is_an_error():
    with pytest.raises(CorpusFormatError, match="no usable example: 0 row"):
        read_gap(GAP_HEADER)  # header only
    with pytest.raises(CorpusFormatError, match="1 row.s. without exactly one antecedent"):
        read_gap(AMBIGUOUS_GAP)


@pytest.mark.slow
def test_cli_gap_without_usable_rows_exits_2(tmp_path):
    path = tmp_path / "gap.tsv"
    path.write_text(AMBIGUOUS_GAP)
    one_line_exit_2(cli("coref", "--gap", str(path)), "no usable example")


def test_gap_rows_whose_offsets_miss_the_mention_are_counted_and_skipped():
    good = "d-1\tAnn met Bo. She left.\tShe\t12\tAnn\t0\tTRUE\tBo\t8\tFALSE\tu\n"
    shifted = "d-2\tAnn met Bo. She left.\tShe\t13\tAnn\t0\tTRUE\tBo\t8\tFALSE\tu\n"  # offset inside the text, wrong
    outside = "d-3\tAnn met Bo.\tShe\t99\tAnn\t0\tTRUE\tBo\t8\tFALSE\tu\n"
    rows = read_gap(GAP_HEADER + good + shifted + outside)
    assert [ex.id for ex in rows.examples] == ["d-1"]
    assert rows.misaligned == 2 and rows.not_one_antecedent == 0 and rows.skipped == 2


# -- calculator (row: 131,072 in every field) --------------------------------------------------------------
def test_calculator_at_its_bounds_does_not_overflow():
    s = make_shape(MAX_DIM, MAX_DIM, MAX_DIM, MAX_DIM, MAX_DIM)
    exact = 2 * MAX_DIM * MAX_DIM * MAX_DIM * (2 * MAX_DIM)
    assert score_flops(s, MAX_DIM) == exact and exact > np.iinfo(np.int64).max
    for fig in (flops_figure(s, MAX_DIM), memory_figure(s, MAX_DIM), kv_cache_figure(s, 4, MAX_DIM)):
        for trace in fig["data"]:
            assert np.all(array_of(trace["y"]).astype(float) > 0), trace["name"]
    assert array_of(flops_figure(s, MAX_DIM)["data"][1]["y"])[-1] == float(exact)
    assert array_of(flops_figure(s, MAX_DIM)["data"][0]["y"])[-1] == float(projection_flops(s, MAX_DIM))
    with pytest.raises(ValueError, match="above the calculator's limit"):
        make_shape(MAX_DIM + 1, 8)


# -- CLI (row: --limit 0 / --limit -5) ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("limit", ["0", "-5"])
def test_cli_limit_must_be_positive(limit):
    one_line_exit_2(cli("roles", "--conllu", "any.conllu", "--limit", limit), "must be at least 1")


@pytest.fixture
def tiny_copy(tmp_path, tiny_dir):
    """A fresh copy of the tiny BERT folder to break in one way."""
    import shutil

    path = tmp_path / "model"
    shutil.copytree(tiny_dir, path)
    return path


def edit_config(path, **changes) -> None:
    import json

    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def edit_weights(path, change) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(path / "model.safetensors")
    change(tensors)
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize(("breakage", "message"), [
    ("more layers in the config", "do not match the sizes in config.json: it asks for 3 layers"),
    ("one tensor missing", "lack 1 tensor(s) its config.json asks for (first: encoder.layer.1.output.dense.weight)"),
    ("NaN weights", "hold NaN or infinite values (encoder.layer.0.attention.self.query.weight)"),
    ("no layers", "has no layers"),
    ("three positions", "reads at most 3 positions"),
])
def test_a_model_folder_that_cannot_run_is_one_sentence(tiny_copy, breakage, message):  # issue 18, finding 7
    import torch

    if breakage == "more layers in the config":
        edit_config(tiny_copy, num_hidden_layers=3)
    elif breakage == "one tensor missing":
        edit_weights(tiny_copy, lambda t: t.pop("encoder.layer.1.output.dense.weight"))
    elif breakage == "NaN weights":
        edit_weights(tiny_copy, lambda t: t["encoder.layer.0.attention.self.query.weight"].fill_(torch.nan))
    elif breakage == "no layers":
        edit_config(tiny_copy, num_hidden_layers=0)
    else:
        edit_config(tiny_copy, max_position_embeddings=3)
        edit_weights(tiny_copy, lambda t: t.update({"embeddings.position_embeddings.weight":
                                                    t["embeddings.position_embeddings.weight"][:3].clone()}))
    with pytest.raises(ModelLoadError) as err:
        load_model(tiny_copy)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_finite_check_finds_every_non_finite_value_and_no_false_one(dtype):
    """all_finite reads a tensor's sum: NaN, either infinity, or both (whose sum is NaN) anywhere are found, and finite
    values whose sum overflows are still finite."""
    import torch

    from mha_core.engine.loading.checks import all_finite

    dtype = getattr(torch, dtype)
    big = torch.finfo(dtype).max
    assert all_finite(torch.randn(64, 33).to(dtype))
    assert all_finite(torch.full((1000,), big, dtype=dtype))  # the sum overflows; every value is finite
    assert all_finite(torch.tensor([big, -big, big], dtype=dtype))
    for bad in ([torch.nan], [torch.inf], [-torch.inf], [torch.inf, -torch.inf], [big, big, torch.nan]):
        values = torch.randn(50, 40).to(dtype)
        values.view(-1)[[997, 13, 1500][: len(bad)]] = torch.tensor(bad, dtype=dtype)
        assert not all_finite(values), bad


@pytest.mark.timeout(60)
def test_a_config_that_is_a_pipe_is_refused_not_waited_on(tiny_copy):  # issue 18, finding 7
    import os

    (tiny_copy / "config.json").unlink()
    os.mkfifo(tiny_copy / "config.json")
    with pytest.raises(ModelLoadError, match="is not a regular file"):
        load_model(tiny_copy)


def test_batches_count_typed_special_tokens_as_the_model_sees_them(bundled):  # issue 18, finding 2
    from mha_core import run
    from mha_core.engine.batching import piece_lengths

    texts = ["[SEP]" * 170, "[CLS] [MASK] " * 40, "plain words here"]
    assert piece_lengths(bundled, texts) == [run(bundled, t).lengths[0] for t in texts]


def test_text_files_split_on_newlines_only_and_decode_utf8_with_or_without_bom(tmp_path):  # finding 8
    from mha_core.analysis.corpus.readers import read_conllu, read_text_lines

    lines = read_text_lines("One\x0csentence.\nTwo\x85still two\u2028and two.\r\nThree.\n")
    assert lines == ["One\x0csentence.", "Two\x85still two\u2028and two.", "Three."]
    conllu = tmp_path / "bom.conllu"
    conllu.write_bytes("\ufeff# text = Hi there\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n2\tthere\tthere\tADV\t_\t_\t1\t"
                       "advmod\t_\t_\n\n".encode())
    assert read_conllu(conllu)[0].words == ("Hi", "there")
    for name, data, message in (("utf16.txt", "Hello there.\n".encode("utf-16"), "UTF-16"),
                                ("binary.txt", bytes(range(256)) * 4, "not UTF-8")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CorpusFormatError, match=message):
            read_text_lines(tmp_path / name)


@pytest.mark.timeout(30)
def test_an_endless_file_is_refused_at_the_byte_cap():  # finding 8: --text-file /dev/zero read 3 GB
    from mha_core.analysis.corpus.readers import read_text_lines

    with pytest.raises(CorpusFormatError, match="larger than 20 MB"):
        read_text_lines(Path("/dev/zero"))


def test_unreadable_lines_are_left_out_with_their_line_numbers(tiny):  # finding 8
    from mha_core.analysis.corpus.passes import corpus_pass, selection_note

    corpus = corpus_pass(tiny, ["A first sentence.", "", "\x00\x07", "Another one here.", "\x1b"])
    assert corpus.texts == ("A first sentence.", "Another one here.")
    assert corpus.selection.unreadable == (3, 5)
    assert selection_note(corpus.selection) == "Left out: 2 line(s) with nothing the model can read (3, 5)."
    with pytest.raises(InputError, match="nothing the model can read"):
        corpus_pass(tiny, ["\x07"])


def test_a_corpus_is_capped_in_pieces_per_text_and_in_all(tiny):  # finding 4
    from mha_core.analysis.corpus.passes import corpus_pass, selection_note
    from mha_core.engine.batching import select_texts

    chosen = select_texts([10, 300, 2, 50, 60, 5], empty_length=2, max_text=256, max_total=70)
    assert (chosen.keep, chosen.too_long, chosen.unreadable, chosen.beyond_cap) == ((0, 3), (2,), (3,), 2)
    corpus = corpus_pass(tiny, ["one two three four five six"] * 10, max_pieces=30)
    assert len(corpus.texts) == 3 and corpus.selection.beyond_cap == 7
    assert "past the cap of 30 word pieces per corpus" in selection_note(corpus.selection)


def test_a_line_too_long_to_read_is_left_out_without_tokenizing_it(tiny, monkeypatch):  # finding 4
    from mha_core.analysis.corpus.passes import corpus_pass
    from mha_core.engine.batching import MAX_CHARS_PER_PIECE

    huge = "word " * (MAX_CHARS_PER_PIECE * tiny.max_length // 5 + 1)  # more characters than it could read
    tokenizer_class, seen = type(tiny.tokenizer), []
    original = tokenizer_class.__call__

    def spy(self, text, *args, **kwargs):
        seen.extend([text] if isinstance(text, str) else text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(tokenizer_class, "__call__", spy)
    corpus = corpus_pass(tiny, ["The cat sat.", huge, "A dog ran."])
    assert corpus.selection.too_long == (2,) and len(corpus.texts) == 2
    assert seen and max(len(t) for t in seen if isinstance(t, str)) < len(huge)
