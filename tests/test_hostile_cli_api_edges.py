"""Hostile sweep after issues 77/78: a hook returning a sparse tensor, `app --port` past 65535, and `align` with a
byte-order mark or an output path that is another of its files. Each was a raw error, a failure left to Streamlit,
or a silent wrong result before."""

from __future__ import annotations

import pytest

from mha_core import InputError, load_model, run_with_hooks
from tests.conftest import cli
from tests.test_hostile_cli import align_files
from tests.tiny_models import make_tiny

TEXT = "The animal didn't cross the street."


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return load_model(make_tiny("llama", tmp_path_factory.mktemp("llama")))


@pytest.mark.parametrize("point", ["blocks.0.attn.hook_z", "blocks.0.attn.hook_pattern", "blocks.1.hook_resid_post"])
def test_a_hook_returning_a_sparse_tensor_is_told_so(llama, point):
    """Before: NotImplementedError "Could not run 'aten::ne.Scalar' with arguments from the 'SparseCPU' backend" (a
    sparse tensor of the right shape, dtype and device passed the check)."""
    with pytest.raises(InputError) as refused:
        run_with_hooks(llama, TEXT, [(point, lambda tensor, _: tensor.to_sparse())])
    assert refused.value.code == "hook_returned_unlike" and "sparse_coo" in str(refused.value)


@pytest.mark.parametrize(("port", "accepted"), [("0", False), ("-1", False), ("65536", False), ("70000", False),
                                                ("99999999999999999999", False), ("²", False), ("1", True),
                                                ("65535", True)])
def test_app_takes_a_tcp_port_only(port, accepted):
    """Before: 65536 and 70000 were handed to Streamlit (which cannot listen there)."""
    from mha_core.cli import build_parser

    if accepted:
        assert build_parser().parse_args(["app", "--port", port]).port == int(port)
        return
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["app", "--port", port])
    assert stopped.value.code == 2


def test_align_reads_past_a_byte_order_mark(tmp_path):
    """Before: a file saved by Windows Notepad kept U+FEFF in its first word ('\\ufeff动物')."""
    from mha_core.cli.translation import sentence_lines

    lines = tmp_path / "s.zh"
    lines.write_bytes("\ufeff动物 过 马路\r\n那 只 狗\n".encode())
    assert sentence_lines(str(lines), "source") == ["动物 过 马路", "那 只 狗"]


@pytest.mark.parametrize(("flag", "same_as"), [("--out", "--source-file"), ("--out", "--target-file"),
                                               ("--json", "--out"), ("--json", "--source-file")])
def test_align_refuses_an_output_that_is_another_of_its_files(tmp_path, tiny_dir, flag, same_as):
    """Before: --out at the source file truncated the user's sentences; --json at --out interleaved the Pharaoh
    lines and the JSON in one file (both exit 0)."""
    args = align_files(tmp_path, ["动物 过 马路"], ["the animal crossed"])
    paths = {"--source-file": args[1], "--target-file": args[3], "--out": str(tmp_path / "a.txt"),
             "--json": str(tmp_path / "a.json")}
    paths[flag] = paths[same_as]
    before = {path: (tmp_path / path).read_bytes() for path in ("s.zh", "t.en")}
    run = cli("align", *args[4:], "--model-dir", str(tiny_dir), *[v for item in paths.items() for v in item])
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert f"{flag} {paths[flag]} is the file {same_as} names" in run.stderr
    assert {path: (tmp_path / path).read_bytes() for path in ("s.zh", "t.en")} == before


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return make_tiny("llama", tmp_path_factory.mktemp("llama-cli"))


LONE = "The animal\udcff crossed."  # what argv holds for a byte a UTF-8 terminal could not decode (surrogateescape)


@pytest.mark.parametrize("command", [["attention", LONE], ["efficiency", LONE, "--pattern", "window:1"]],
                         ids=["attention", "efficiency"])
def test_a_lone_surrogate_in_a_text_is_read(llama_dir, command):
    """Before: TypeError 'TextEncodeInput must be Union[…]' from the tokenizer (a traceback, exit 1)."""
    run = cli(*command, "--model-dir", str(llama_dir), "--json", "-")
    assert run.returncode == 0 and run.stderr == "" and '"animal"' in run.stdout, run.stderr[-300:]


def test_the_api_reads_a_lone_surrogate_as_u_fffd(llama):
    """The text's length is kept (offsets hold): the surrogate's character is U+FFFD."""
    assert run_with_hooks(llama, LONE).tokens == run_with_hooks(llama, LONE.replace("\udcff", "\ufffd")).tokens


@pytest.mark.parametrize("lengths", [[2, 2, 2], [4, 4]])
def test_bench_lengths_repeated_are_timed_once_with_no_slope(lengths):
    """Before: each repeat was timed again and polyfit warned (RankWarning) while a 'slope' of noise was given."""
    import math
    import warnings

    from mha_core.analysis.efficiency.cost import attention_cost

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cost = attention_cost(lengths, heads=2, head_dim=4, kernels=["explicit"], memory=False)
    assert cost.lengths == (lengths[0],) and math.isnan(cost.slopes["explicit"])


@pytest.mark.parametrize("call", [lambda m: run_with_hooks(m, TEXT, [(None, lambda t, _: None)]),
                                  lambda m: run_with_hooks(m, TEXT, "blocks.0.attn.hook_z"),
                                  lambda m: __import__("mha_core").run_with_cache(m, TEXT, 7)],
                         ids=["name None", "hooks a str", "filter an int"])
def test_a_wrong_argument_type_is_said_as_a_reader_says_it(llama, call):
    """Before: "Callable[[<class 'str'>], bool]" (a Callable's parameter list was printed as Python's repr)."""
    with pytest.raises(InputError) as refused:
        call(llama)
    assert "Callable[[str], bool]" in str(refused.value) and "<class" not in str(refused.value)


def test_align_out_dash_is_standard_output_and_not_with_json_dash(tmp_path, tiny_dir, monkeypatch):
    """Before: `--out -` wrote a file named '-' (while `--json -` meant standard output)."""
    import mha_core.cli.translation as translation

    monkeypatch.chdir(tmp_path)
    args = align_files(tmp_path, ["动物 过 马路"], ["the animal crossed"])
    both = cli("align", *args, "--model-dir", str(tiny_dir), "--out", "-", "--json", "-")
    assert both.returncode == 2 and "cannot both be '-'" in both.stderr and not (tmp_path / "-").exists()
    with translation.output_file("-") as out:
        assert out is __import__("sys").stdout
    assert not (tmp_path / "-").exists()
