"""`python -m mha_core head-distances`, run as a user would (issue 13)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_core.analysis.corpus.passes import corpus_pass
from mha_core.analysis.corpus.readers import read_conllu
from tests.conftest import SHARED_DATA, cli

pytestmark = pytest.mark.slow  # each call loads a model and reads a corpus
EWT = SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu"


def test_a_conllu_file_gives_the_matrix_of_its_typed_sentences(tmp_path, bundled):
    out = tmp_path / "d.json"
    proc = cli("head-distances", "--conllu", str(EWT), "--limit", "6", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["sentences"] == 6 and len(data["heads"]) == 72
    assert data["heads"][:13] == [[0, h] for h in range(12)] + [[1, 0]]  # layer-major, 0-based
    distance = np.array(data["distance"])
    assert distance.shape == (72, 72) and np.array_equal(distance, distance.T) and np.all(np.diag(distance) == 0)
    texts = [s.text for s in read_conllu(EWT, limit=6)]
    assert texts[0] == "From the AP comes this story :"  # the `# text` line
    assert np.abs(distance - corpus_pass(bundled, texts).distance).max() <= 1e-7


def test_a_text_file_on_a_tiny_decoder(tmp_path, family_dirs):
    corpus = tmp_path / "c.txt"
    corpus.write_text("The cat sat.\n\n  Dogs bark loudly at night.  \nIt rained.\n", encoding="utf-8")
    proc = cli("head-distances", "--text-file", str(corpus), "--model-dir", str(family_dirs["llama"]), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["sentences"] == 3 and len(data["heads"]) == len(data["distance"]) == 2 * 4


@pytest.mark.parametrize(("content", "message"), [
    (None, "No such file"),
    ("\n   \n", "no sentences found"),
    ("1\tonly two\n", "expected 10 tab-separated"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, content, message):
    path = tmp_path / "in.conllu"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    flag = "--text-file" if content == "\n   \n" else "--conllu"
    proc = cli("head-distances", flag, str(path), "--json", "-")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


def test_the_source_is_required_and_exclusive(tmp_path):
    for args in ((), ("--conllu", "a", "--text-file", "b")):
        proc = cli("head-distances", *args, "--json", "-")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
