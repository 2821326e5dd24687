"""Hostile input to `explain` (issue 81) and `align`: what a careless command line is told in one line, first."""

from __future__ import annotations

import pytest

from tests.conftest import cli


@pytest.mark.parametrize("bad", [["--methods", "bogus"], ["--steps", "0"]])
def test_a_dataset_run_refuses_bad_methods_or_steps_before_any_text(lm_dirs, monkeypatch, bad):
    import mha_core.analysis.explain.dataset as dataset

    monkeypatch.setattr(dataset, "explain", lambda *a, **k: pytest.fail("a text was explained"))
    run = cli("explain", "--dataset", "corpus", *bad, "--model-dir", str(lm_dirs["llama-tied"]), "--json", "-")
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()[-1:]) == 1 and "skipped" not in run.stderr
    assert ("Unknown method 'bogus'" if "bogus" in bad else "1 to 300 steps, not 0") in run.stderr


def test_an_answer_that_is_its_own_wrong_word_is_refused(lm_dirs):
    run = cli("explain", "the cat sat", "--answer", "cat", "--wrong", " cat ", "--model-dir",
              str(lm_dirs["llama-tied"]), "--json", "-")
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    assert "same piece 'cat'" in run.stderr


@pytest.mark.parametrize("target", ["/dev/zero", "empty"])
def test_align_refuses_an_endless_or_empty_file_in_one_line(tmp_path, tiny_dir, target):
    """`align --target-file /dev/zero` read without end (memory); two empty files aligned nothing and exited 0."""
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    source = str(empty) if target == "empty" else str(tmp_path / "s.txt")
    (tmp_path / "s.txt").write_text("动物 过 马路\n", encoding="utf-8")
    run = cli("align", "--source-file", source, "--target-file", str(empty) if target == "empty" else target,
              "--source-lang", "zh", "--target-lang", "en", "--out", "-", "--model-dir", str(tiny_dir))
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert ("larger than 20 MB" if target == "/dev/zero" else "line 1 is empty") in run.stderr


def test_an_image_path_without_end_is_refused_as_too_large(tmp_path):
    """`explain /dev/zero --model-dir <a ViT>` read the whole path before its size was checked: memory without end."""
    from mha_core.engine.tokens import InputError
    from mha_core.engine.vision.images import read_image

    with pytest.raises(InputError) as refused:
        read_image("/dev/zero")
    assert refused.value.code == "image_too_large" and "over 50 MB" in str(refused.value)  # not "is 50 MB"
    with pytest.raises(InputError) as folder:
        read_image(tmp_path)
    assert folder.value.code == "image_unreadable_file"


@pytest.mark.parametrize("reader", ["decoder", "encoder"])
def test_gap_without_its_file_or_on_an_encoder_says_which(lm_dirs, tiny_dir, reader):
    """`explain --dataset gap` without --gap-file on a decoder was told "is an encoder or no file was given": now
    the missing file and the encoder are told apart."""
    model_dir = lm_dirs["llama-tied"] if reader == "decoder" else tiny_dir
    run = cli("explain", "--dataset", "gap", "--model-dir", str(model_dir), "--json", "-")
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    said, = run.stderr.strip().splitlines()  # one line: no empty progress bar before it
    assert ("give --gap-file" in said) == (reader == "decoder") and ("is an encoder" in said) == (reader == "encoder")
