"""Issue 34: every rule has one owner in mha_core, and the pages only draw. The pages' copies the issue found are
checked for by what they looked like (each check fails on the main of before), the owners by what they answer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "views").glob("*.py"))

PAGE_COPIES = {  # what a page's own copy of a rule looked like -> the owner that says it now
    r"np\.argsort\(|\.argmax\(\)|np\.unravel_index": "analysis.roles.ranked_heads (rule 2)",
    r"head // |// w\.group": "engine.attention.kv_head (rule 4)",
    r"induction_scores\(": "serving.computed.induction_of (rule 5)",
    r"def use_sentence": "views._inputs.set_sentence (rule 6)",
    r'strip\(" \(\)"\)': "views._uploads.cap_note, one sentence (rule 7)",
    r"-\(-n //": "analysis.long_text.block_side (rule 8)",
    r"\[:12\]": "analysis.coref_sentence.TABLE_HEADS (rule 10)",
    r"json\.dumps\(": "serving.export.json_text, the CLI's writer (rule 11)",
    r"SharedStore|shared_store|\.get\(\(|heavy_work|HeavyWork": "serving.server.Server and serving.computed",
    r"min\(query \+ 1": "analysis.display.uniform_piece_weight (rule 1)",
}


@pytest.mark.parametrize("pattern", list(PAGE_COPIES))
def test_no_page_keeps_its_own_copy_of_a_rule(pattern):
    found = [f"{page.name}:{n}" for page in PAGES
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if re.search(pattern, line)]
    assert not found, f"{PAGE_COPIES[pattern]}: {found}"


def test_deploy_imports_no_benchmark_code():  # rule 12: wait_healthy and the websocket client live in deploy/
    for path in (ROOT / "deploy").glob("*.py"):
        assert not re.search(r"^(from|import) benchmarks", path.read_text(encoding="utf-8"), re.M), path.name


def test_the_uniform_baseline_of_a_decoder_counts_the_keys_a_query_sees():
    """Rule 1: 1/(i + 1) for query i of a decoder, 1/window where the layer's window is shorter, 1/n in an encoder."""
    from mha_core.analysis.heads.display import uniform_piece_weight

    assert uniform_piece_weight(10, 3, causal=True) == 1 / 4
    assert uniform_piece_weight(10, 9, causal=True, window=4) == 1 / 4
    assert uniform_piece_weight(10, 3, causal=False) == 1 / 10


def test_a_query_head_reads_the_key_value_head_the_kernel_gives_it():
    """Rule 4: kv_head is what repeat_kv does to the tensors."""
    import torch

    from mha_core.engine.attention import heads_sharing, kv_head, repeat_kv

    k = torch.arange(3.0).view(1, 3, 1, 1)  # (B,G,S,Dh): key/value head g holds g
    repeated = repeat_kv(k, 9)[0, :, 0, 0]  # (H,)
    assert [kv_head(h, 9, 3) for h in range(9)] == repeated.long().tolist()
    assert list(heads_sharing(1, 9, 3)) == [3, 4, 5]


def test_the_cli_and_the_roles_page_read_the_same_relation_rows():
    """Rule 9: SyntaxResult.relation_rows is what the CLI writes and the Roles page's table shows."""
    from mha_core import analyse_syntax, load_model
    from mha_core.analysis.corpus.readers import parse_conllu

    conllu = ("# text = The cat sat .\n1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
              "3\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_\n4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_\n")
    result = analyse_syntax(load_model(), parse_conllu(conllu.splitlines(keepends=True), None))
    written = result.as_json()
    rows = result.relation_rows()
    assert list(written["relations"]) == [row["relation"] for row in rows]
    assert all(written["relations"][row["relation"]]["best_layer"] == row["best_layer"] for row in rows)
