"""The CLI as a user sees it: JSON out, exit status 2 with one line on bad input. The program itself runs as a
subprocess once; the other calls run its main() in this process (tests.conftest.cli)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ANIMAL_TIRED, ROOT, cli, transformers_attentions

pytestmark = pytest.mark.slow  # each call loads a model


def test_python_m_mha_core_is_the_program():
    proc = subprocess.run([sys.executable, "-m", "mha_core", "attention", ANIMAL_TIRED, "--json", "-"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "animal" in json.loads(proc.stdout)["tokens"]


def test_attention_json(tmp_path):
    out = tmp_path / "a.json"
    proc = cli("attention", ANIMAL_TIRED, "--path", "fused", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    t = len(data["tokens"])
    assert data["tokens"][0] == "[CLS]" and "animal" in data["tokens"]
    assert len(data["attention"]) == 6 and len(data["attention"][0]) == 12
    assert len(data["attention"][5][11]) == t and len(data["attention"][5][11][0]) == t
    assert abs(sum(data["attention"][2][3][4]) - 1) < 1e-5
    assert data["path"] == "fused" and data["backend"] == "flash (CPU)" and data["truncated"] is False
    theirs, tokens = transformers_attentions(ANIMAL_TIRED)  # every map, against transformers' eager BertModel
    assert data["tokens"] == tokens and np.abs(np.array(data["attention"]) - theirs).max() <= 1e-5  # 1.4e-6 measured



@pytest.mark.parametrize(("args", "message"), [
    (("attention", ""), "empty"),
    (("attention", "   \n\t "), "empty"),
    (("attention", "hi", "--model-dir", "/no/such/dir"), "not found"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    proc = cli(*args, "--json", "-")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


def test_unsupported_architecture_exits_2(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "pegasus"}')
    proc = cli("attention", "hi", "--model-dir", str(tmp_path))
    assert proc.returncode == 2 and "Unsupported architecture" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
