"""Issue 44: results fixed by a model and the bundled files (the induction probe, a bundled corpus's analysis and head
distances) are kept in the user's cache (serving.on_disk): a new server reads them back equal without computing them;
a damaged or foreign file, or one of another kind, is computed again and written over; another model, other inputs or
other code never read a file; an upload's analysis is never written. On a tiny random BERT in a cache of its own."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mha_core.analysis.corpus.passes import HeadDistances
from mha_core.analysis.corpus.readers import CHINESE_TREEBANK, chinese_treebank
from mha_core.analysis.corpus.syntax import CorpusAnalysis
from mha_core.analysis.lm.patching import HEADS
from mha_core.serving import on_disk
from mha_core.serving.computed import corpus as computed_corpus
from mha_core.serving.computed import text as computed_text
from mha_core.serving.server import Server, no_wait
from tests.conftest import ANIMAL_TIRED, ANIMAL_WIDE

TREEBANK = computed_corpus.corpus_key(CHINESE_TREEBANK)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MHA_CACHE_DIR", str(tmp_path))
    return tmp_path


def same(a: object, b: object) -> bool:
    """Equal to the bit: the same classes, field by field; arrays of the same dtype and values."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def analysis(model: object, sentences: list, source: str = TREEBANK) -> object:
    return computed_corpus.corpus_analysis_of(Server(), model, source, sentences, False, no_wait)


def never(*args: object, **kwargs: object) -> None:
    raise AssertionError("computed again")


def test_a_bundled_corpus_s_analysis_is_kept_and_a_new_server_reads_it_back_equal(tiny, cache, monkeypatch):
    sentences = chinese_treebank()[:6]
    first = analysis(tiny, sentences)
    path = computed_corpus.ANALYSIS.path(tiny, sentences)
    assert path.is_file() and path.is_relative_to(cache)
    assert same(on_disk.read(path, CorpusAnalysis), first) and first.syntax.relations and first.roles.metrics
    monkeypatch.setattr(computed_corpus, "analyse_corpus", never)
    assert same(analysis(tiny, sentences), first)  # another server: read, not computed
    with pytest.raises(AssertionError, match="computed again"):
        analysis(tiny, sentences[:5])  # other sentences: another file


def test_a_bundled_corpus_s_head_distances_are_kept_and_equal_the_whole_pass_s(tiny, cache, monkeypatch):
    texts = [s.text for s in chinese_treebank()[:6]]
    first = computed_corpus.head_distances_of(Server(), tiny, TREEBANK, texts, no_wait)
    path = computed_corpus.DISTANCES.path(tiny, texts)
    assert same(on_disk.read(path, HeadDistances), first) and first.roles.metrics and first.rows > 6
    whole = computed_corpus.corpus_pass(tiny, texts)  # with the query and key vectors the query-key view reads
    assert whole.kept == 6 and same(whole.distances(), first)
    monkeypatch.setattr(computed_corpus, "corpus_pass", never)
    assert same(computed_corpus.head_distances_of(Server(), tiny, TREEBANK, texts, no_wait), first)  # read back
    with pytest.raises(AssertionError, match="computed again"):
        computed_corpus.head_distances_of(Server(), tiny, TREEBANK, texts[:5], no_wait)  # other sentences


def test_an_upload_s_head_distances_are_its_whole_pass_s_and_never_written(tiny, cache):
    server, texts = Server(), [s.text for s in chinese_treebank()[:3]]
    distances = computed_corpus.head_distances_of(server, tiny, "upload:0123", texts, no_wait)
    whole = computed_corpus.corpus_pass_of(server, tiny, "upload:0123", texts, no_wait)  # shared: not run again
    assert whole.kept == 3 and distances.distance is whole.distance
    assert not list(cache.rglob("*.npz"))


def test_an_upload_s_analysis_is_never_written(tiny, cache):
    analysis(tiny, chinese_treebank()[:3], source="upload:0123")
    assert not list(cache.rglob("*.npz"))


def test_the_induction_probe_is_kept_and_read_back_equal(tiny, cache, monkeypatch):
    first = computed_text.induction_of(Server(), tiny)
    assert computed_text.INDUCTION.path(tiny).is_file()
    monkeypatch.setattr(computed_text, "induction_scores", never)
    assert same(computed_text.induction_of(Server(), tiny), first)


def test_an_example_s_patching_grid_is_kept_and_a_typed_pair_s_never_written(tiny, cache, monkeypatch):
    """The Coreference page's offered example runs its grid before anyone asks (kept=True): every process of a
    server, and the next server, reads it back equal; a typed pair's grid stays in its server's memory."""
    def grid_of(server: Server, kept: bool, corrupted: str = ANIMAL_WIDE) -> object:
        return computed_text.patch_grid_of(server, tiny, ANIMAL_TIRED, corrupted, None, None, HEADS, None, None,
                                           no_wait, kept=kept)

    typed = grid_of(Server(), kept=False)
    assert not list(cache.rglob("*.npz"))
    first = grid_of(Server(), kept=True)
    assert same(first, typed) and len(list(cache.rglob("*.npz"))) == 1
    monkeypatch.setattr(computed_text, "patch_grid", never)
    assert same(grid_of(Server(), kept=True), first)  # a new server reads it: nothing computed
    with pytest.raises(AssertionError, match="computed"):
        grid_of(Server(), kept=True, corrupted=ANIMAL_WIDE.replace("wide", "busy"))  # another pair: another file


@pytest.mark.parametrize("damage", ["truncated", "garbage", "pickled", "foreign class", "missing field",
                                    "another result"])
def test_a_damaged_or_foreign_file_is_computed_again_and_written_over(tiny, cache, damage):
    sentences = chinese_treebank()[:4]
    first = analysis(tiny, sentences)
    path = computed_corpus.ANALYSIS.path(tiny, sentences)
    tree = str(np.load(path)[on_disk.TREE])
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "garbage":
        path.write_bytes(b"not an npz")
    elif damage == "another result":  # a whole kept file, of another kind: never drawn as this one
        computed_text.induction_of(Server(), tiny)
        path.write_bytes(computed_text.INDUCTION.path(tiny).read_bytes())
    elif damage == "pickled":  # an object array is read only with pickle, which is never allowed
        np.savez(path, **{on_disk.TREE: np.array(tree)}, a0=np.array([object()], dtype=object))
    else:
        bad = (tree.replace('"class": "SyntaxResult"', '"class": "Popen"') if damage == "foreign class"
               else tree.replace('"skipped"', '"skipping"'))
        assert bad != tree
        with np.load(path) as npz:
            np.savez(path, **{**{name: npz[name] for name in npz.files}, on_disk.TREE: np.array(bad)})
    with pytest.raises(on_disk.NotKept):
        on_disk.read(path, CorpusAnalysis)
    assert same(analysis(tiny, sentences), first)
    assert same(on_disk.read(path, CorpusAnalysis), first)  # written over


def test_the_same_model_loaded_again_reads_the_file_and_other_weights_or_code_do_not(tiny, tiny_dir, cache,
                                                                                       monkeypatch):
    import torch

    from mha_core import load_model

    sentences = chinese_treebank()[:3]
    first = analysis(tiny, sentences)
    older = computed_corpus.ANALYSIS.path(tiny, sentences)
    monkeypatch.setattr(computed_corpus, "analyse_corpus", never)
    again = load_model(tiny_dir)
    assert same(analysis(again, sentences), first)  # the same files, loaded again: read
    with torch.no_grad():
        again.embeddings.word[0] += 1  # other weights: another fingerprint
    with pytest.raises(AssertionError, match="computed again"):
        analysis(again, sentences)
    monkeypatch.undo()
    monkeypatch.setenv("MHA_CACHE_DIR", str(cache))
    monkeypatch.setattr(on_disk, "code_digest", lambda: "0" * 16)  # the code edited
    newer = computed_corpus.ANALYSIS.path(tiny, sentences)
    assert newer != older and newer.parent == older.parent
    analysis(tiny, sentences)
    assert newer.is_file() and not older.exists()  # the same inputs' file of the older code removed


@pytest.mark.parametrize("failure", ["no folder", "disk full"])
def test_a_cache_that_cannot_be_written_keeps_nothing_and_still_answers(tiny, cache, monkeypatch, failure):
    if failure == "no folder":
        (cache / "analyses").write_text("a file where the folder goes")  # mkdir fails, as on a read-only disk
    else:
        def full(*args: object, **kwargs: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(on_disk.np, "savez", full)
    assert analysis(tiny, chinese_treebank()[:2]).syntax.sentences == 2
    assert not list(cache.rglob("*.npz")) and not list(cache.rglob(".writing-*"))  # nothing left half-written
