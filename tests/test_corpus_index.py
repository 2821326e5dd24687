"""The corpus index and its search (issue 37): matches equal nearest neighbours computed naively from transformers'
own hidden states and heads' outputs; a compressed index finds what exact search finds; every bad input and damaged
file is one sentence, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mha_core.analysis.index.build import build_index, conllu_corpus, text_corpus
from mha_core.analysis.index.search import search
from mha_core.analysis.index.store import IndexFileError, OpenIndex
from mha_core.engine.forward import run
from mha_core.engine.tokens import InputError
from tests.conftest import ANIMAL_TIRED, SHARED_DATA, cli
from tests.index_reference import nearest_pieces

EWT = SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu"
N_SENTENCES = 60


@pytest.fixture(scope="module")
def ewt_index(bundled, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("index") / "ewt"
    build_index(bundled, conllu_corpus(EWT, N_SENTENCES), [0, 2, 3, 6], folder, shard_pieces=256)
    return folder


def naive_matches(n_sentences: int, position: int, layer: int, heads: tuple[int, ...], top: int
                  ) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The `top` nearest pieces of EWT's first `n_sentences` to ANIMAL_TIRED's piece at `position`, by plain cosines
    over transformers' own vectors (tests.index_reference)."""
    places, scores = nearest_pieces([s.text for s in conllu_corpus(EWT, n_sentences)[1]], ANIMAL_TIRED, position,
                                    layer, heads)
    return places[:top], scores[:top]


@pytest.mark.parametrize(("layer", "heads"), [(3, ()), (6, ()), (2, (0, 5, 11)), (3, tuple(range(12)))])
def test_matches_equal_naive_nearest_neighbours(bundled, ewt_index, layer, heads):
    result = run(bundled, ANIMAL_TIRED, path="explicit")
    it = result.labels[0].index("it")
    places, scores = naive_matches(N_SENTENCES, it, layer, heads, 20)
    found = search(OpenIndex(ewt_index), bundled, result, it, layer, heads, top=20)
    assert [(m.sentence, m.position) for m in found.matches] == places
    np.testing.assert_allclose([m.score for m in found.matches], scores, atol=2e-5)
    first = found.matches[0]
    assert first.context[first.start:first.end].lower() == first.piece.removeprefix("##").lower()


def test_metadata_is_the_corpus_own(bundled, ewt_index):
    index = OpenIndex(ewt_index)
    rows = index.pieces.to_pydict()
    _, sentences, _ = conllu_corpus(EWT, N_SENTENCES)
    first = sentences[0]
    mine = [i for i, s in enumerate(rows["sentence"]) if s == 0]
    words = [rows["word"][i] for i in mine]
    assert [w for w in dict.fromkeys(words) if w] == list(dict.fromkeys(first.words))
    k = mine[0]
    w = rows["word_index"][k] - 1
    assert (rows["pos"][k], rows["deprel"][k], rows["head"][k]) == (first.upos[w], first.deprels[w], first.heads[w])
    manifest = json.loads((ewt_index / "index.json").read_text())
    assert manifest["pieces"] == len(rows["sentence"]) == index.vectors(3, "hidden").ntotal
    assert manifest["search"] == "exact" and manifest["layers"] == [0, 2, 3, 6]
    assert not (ewt_index / "shards").exists() and not (ewt_index / "build.json").exists()
    assert not index.manifest.has(6, "heads") and index.manifest.has(3, "heads")


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_a_compressed_index_finds_what_exact_search_finds(bundled, tmp_path, monkeypatch):
    from mha_core.analysis.index import passes as index_pass
    from mha_core.analysis.index import write as index_write

    corpus = conllu_corpus(EWT, 300)
    passes: dict[tuple[str, ...], object] = {}  # the two builds read the same model pass: run once per shard

    def run_once(model, texts, **options):
        if tuple(texts) not in passes:
            passes[tuple(texts)] = run(model, texts, **options)
        return passes[tuple(texts)]

    monkeypatch.setattr(index_pass, "run", run_once)
    exact = build_index(bundled, corpus, [3], tmp_path / "exact")
    monkeypatch.setattr(index_pass, "EXACT_MAX_BYTES", 0)
    monkeypatch.setattr(index_write, "TRAIN_SAMPLE", 3000)  # faster training, lower recall: the test's margin
    compressed = build_index(bundled, corpus, [3], tmp_path / "ivfpq")
    assert (exact["search"], compressed["search"]) == ("exact", "ivfpq")
    assert compressed["bytes"] < exact["bytes"]
    a, b = OpenIndex(tmp_path / "exact"), OpenIndex(tmp_path / "ivfpq")
    texts = [s.text for s in corpus[1][:12:4]]
    recalls = []
    for text in texts:
        result = run(bundled, text, path="explicit")
        for position in range(1, result.lengths[0] - 1, 3):
            for heads in ((), (1, 4)):
                want = search(a, bundled, result, position, 3, heads, top=10).matches
                got = search(b, bundled, result, position, 3, heads, top=10).matches
                recalls.append(len({(m.sentence, m.position) for m in want} & {(m.sentence, m.position) for m in got})
                               / 10)
                exact_scores = {(m.sentence, m.position): m.score for m in want}
                for m in got:  # rescored from float16 rows: the true cosine, to float16's precision
                    if (m.sentence, m.position) in exact_scores:
                        assert abs(m.score - exact_scores[m.sentence, m.position]) < 3e-3
    assert np.mean(recalls) >= 0.9


def test_an_unreadable_line_is_left_out_and_named(tiny, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat.\n\n\x01\x02\x03\nIt was tired.\n", encoding="utf-8")
    manifest = build_index(tiny, text_corpus(corpus), [1], tmp_path / "index")
    assert manifest["left_out"] == {"unreadable": [2], "too_long": []}
    assert sorted(set(OpenIndex(tmp_path / "index").pieces.column("sentence").to_pylist())) == [0, 3]


def test_an_index_of_another_model_or_layer_is_refused_naming_both(bundled, tiny, ewt_index):
    index = OpenIndex(ewt_index)
    result = run(tiny, ANIMAL_TIRED, path="explicit")
    with pytest.raises(IndexFileError, match="was built with all-MiniLM-L6-v2 .* the query runs .*tiny-bert"):
        search(index, tiny, result, 1, 3)
    result = run(bundled, ANIMAL_TIRED, path="explicit")
    with pytest.raises(IndexFileError, match="holds layers 0, 2, 3, 6 of all-MiniLM-L6-v2; layer 4 is not"):
        search(index, bundled, result, 1, 4)
    with pytest.raises(InputError, match="no head runs on it"):
        search(index, bundled, result, 1, 6, (0,))
    n = result.lengths[0]
    with pytest.raises(InputError, match=f"pieces 0 to {n - 1} .*; {n} is not one"):
        search(index, bundled, result, n, 3)


def damaged_copy(ewt_index: Path, folder: Path) -> Path:
    import shutil

    shutil.copytree(ewt_index, folder)
    return folder


def test_damaged_files_are_refused_before_faiss_reads_them(ewt_index, tmp_path):
    truncated = damaged_copy(ewt_index, tmp_path / "truncated")
    path = truncated / "L3.hidden.faiss"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(IndexFileError, match="L3.hidden.faiss has .* bytes where the index wrote .*truncated"):
        OpenIndex(truncated)
    corrupted = damaged_copy(ewt_index, tmp_path / "corrupted")
    data = bytearray((corrupted / "L3.hidden.faiss").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (corrupted / "L3.hidden.faiss").write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="L3.hidden.faiss is corrupted"):
        OpenIndex(corrupted)
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexFileError, match="is not a corpus index: it has no index.json"):
        OpenIndex(tmp_path / "empty")
    garbled = damaged_copy(ewt_index, tmp_path / "garbled")
    (garbled / "index.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexFileError, match="damaged or not a corpus index"):
        OpenIndex(garbled)
    with pytest.raises(IndexFileError, match="is not a folder"):
        OpenIndex(tmp_path / "nowhere")


def test_a_build_never_overwrites_a_folder(tiny, ewt_index, tmp_path):
    corpus = text_corpus(write_lines(tmp_path, ["One cat.", "Two dogs."]))
    with pytest.raises(IndexFileError, match="already holds an index"):
        build_index(tiny, corpus, [1], ewt_index)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(IndexFileError, match="is not empty and holds no index"):
        build_index(tiny, corpus, [1], tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    with pytest.raises(InputError, match="layers are 0 .* to 2 .* 5 is not"):
        build_index(tiny, corpus, [5], tmp_path / "new")


def write_lines(folder: Path, lines: list[str]) -> Path:
    path = folder / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_stopped_build_resumes_without_redoing_shards(tiny, tmp_path):
    from mha_core.analysis.index import build as index_build

    corpus = text_corpus(write_lines(tmp_path, [f"Sentence number {i} is here, with words." for i in range(40)]))
    reference = build_index(tiny, corpus, [0, 2], tmp_path / "whole", shard_pieces=64)
    computed = []

    def stop_after_three(model, plan, shard):  # the process dies after three shards
        if len(computed) == 3:
            raise KeyboardInterrupt
        computed.append(shard)
        return real(model, plan, shard)

    real = index_build.shard_bytes
    index_build.shard_bytes = stop_after_three
    try:
        with pytest.raises(KeyboardInterrupt):
            build_index(tiny, corpus, [0, 2], tmp_path / "stopped", shard_pieces=64)
    finally:
        index_build.shard_bytes = real
    resumed = build_index(tiny, corpus, [0, 2], tmp_path / "stopped", shard_pieces=64)
    assert resumed["built"]["shards_computed"] == reference["built"]["shards"] - 3
    assert {k: v["sha256"] for k, v in resumed["files"].items()} == {k: v["sha256"]
                                                                     for k, v in reference["files"].items()}


def test_cli_index_and_search(bundled, tmp_path):
    it = str(run(bundled, ANIMAL_TIRED).labels[0].index("it"))
    out = tmp_path / "index"
    made = cli("index", "--conllu", str(EWT), "--limit", "30", "--model", "all-MiniLM-L6-v2", "--layers", "0,3,5",
               "--out", str(out), "--json", str(tmp_path / "built.json"))
    assert made.returncode == 0, made.stderr
    built = json.loads((tmp_path / "built.json").read_text())
    assert built["layers"] == [0, 3, 5] and built["pieces"] > 300 and built["bytes_per_piece"] > 0
    found = cli("search", "--index", str(out), "--text", ANIMAL_TIRED, "--token", it, "--layer", "3", "--heads",
                "3:1,3:7", "--top", "5", "--json", str(tmp_path / "found.json"))
    assert found.returncode == 0, found.stderr
    data = json.loads((tmp_path / "found.json").read_text())
    assert data["query"] == {"piece": "it", "position": int(it)} and data["layer"] == 3 and len(data["matches"]) == 5
    assert set(data["matches"][0]) >= {"sentence", "position", "piece", "word", "score", "context"}
    assert [m["score"] for m in data["matches"]] == sorted((m["score"] for m in data["matches"]), reverse=True)
    places, scores = naive_matches(30, int(it), 3, (1, 7), 5)  # the --limit 30 sentences, plain cosines
    assert [(m["sentence"], m["position"]) for m in data["matches"]] == places
    assert np.abs(np.array([m["score"] for m in data["matches"]]) - scores).max() <= 2e-5
    for args, said in ((("--layer", "4"), "layer 4 is not among them"),
                       (("--layer", "3", "--heads", "2:1"), "--heads names heads of layer 2 and --layer is 3"),
                       (("--layer", "3", "--token", "99"), "99 is not one")):
        wrong = cli("search", "--index", str(out), "--text", ANIMAL_TIRED, "--token", it, *args)
        assert wrong.returncode == 2 and said in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
    missing = cli("search", "--index", str(tmp_path), "--text", "x", "--token", "1", "--layer", "0")
    assert missing.returncode == 2 and "has no index.json" in missing.stderr


def test_the_notebook_api_searches_and_draws(bundled, ewt_index):
    import mha_core

    found = mha_core.search_text(str(ewt_index), bundled, ANIMAL_TIRED, 10, 3, heads=(1, 7), top=5)
    assert isinstance(found, mha_core.SearchResult) and len(found.matches) == 5 and found.heads == (1, 7)
    places, scores = naive_matches(N_SENTENCES, 10, 3, (1, 7), 5)  # piece 10 ("it"), plain cosines
    assert [(m.sentence, m.position) for m in found.matches] == places
    np.testing.assert_allclose([m.score for m in found.matches], scores, atol=2e-5)
    figure = found.figure()
    assert [a.text for a in figure.layout.annotations] == ["Words", "Parts of speech", "Relations"]
    assert "【" not in found._repr_html_() and "[" in found._repr_html_() and "<table" in found._repr_html_()


def test_a_flat_index_written_a_shard_at_a_time_is_faiss_s_own_file():
    """write_exact streams the vectors after flat_header: the file is byte for byte faiss's write_index of the index
    holding them all, and faiss reads it back (the build never holds a whole column, issue 43)."""
    import faiss

    from mha_core.analysis.index.write import flat_header

    vectors = np.random.default_rng(0).standard_normal((11, 7)).astype(np.float32)
    whole = faiss.IndexFlatIP(7)
    whole.add(vectors)
    streamed = flat_header(7, 11) + vectors[:4].tobytes() + vectors[4:].tobytes()
    assert streamed == bytes(faiss.serialize_index(whole))
    read = faiss.deserialize_index(np.frombuffer(streamed, dtype=np.uint8))
    assert read.ntotal == 11 and np.array_equal(read.reconstruct_n(0, 11), vectors)
