"""Run in a process of its own by test_index_memory.py: build an index of `lines` lines (UD English EWT's dev
sentences, repeated) with the model at `folder`, and print the peak RSS's growth during the build in MB."""

from __future__ import annotations

import resource
import sys
from pathlib import Path


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(model_dir: str, lines: int, out: str) -> None:
    from mha_core.analysis.corpus.readers import read_conllu
    from mha_core.analysis.index.build import build_index, text_corpus
    from mha_core.engine.forward import run
    from mha_core.engine.loading.model import load_model
    from tests.conftest import SHARED_DATA

    texts = [s.text for s in read_conllu(SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu")]
    corpus = Path(out).with_suffix(".txt")
    corpus.write_text("\n".join(texts[i % len(texts)] for i in range(lines)) + "\n", encoding="utf-8")
    import faiss  # noqa: F401 - the libraries' own code is loaded before the measure starts
    import pyarrow.parquet  # noqa: F401

    model = load_model(model_dir)
    run(model, texts[:8], path="explicit")  # the model's own working memory, paid before the build
    before = peak_mb()
    manifest = build_index(model, text_corpus(corpus), [0, 1], out)
    print(f"{peak_mb() - before:.1f} {manifest['pieces']} {manifest['search']}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
