"""Run in a process of its own by test_index_memory.py: for each LINES OUT pair, build an index of `lines` lines
(UD English EWT's dev sentences, repeated) with the model at `folder`, and print the peak RSS's growth during the
build in MB. Each build runs in a child forked once the libraries are imported (a fresh process for each spent about
3.5 s importing them; torch computes nothing before the fork, whose thread pool a child could not use), and measures
its own peak (a forked child's starts at its resident memory then)."""

from __future__ import annotations

import resource
import sys
from functools import partial
from pathlib import Path


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(model_dir: str, runs: list[tuple[int, str]]) -> None:
    from mha_core.analysis.corpus.readers import read_conllu
    from mha_core.analysis.index.build import build_index  # noqa: F401 - imported once, for every child
    from mha_core.engine.forward import run  # noqa: F401
    from mha_core.engine.loading.model import load_model  # noqa: F401
    from tests.cli_forks import in_fork
    from tests.conftest import SHARED_DATA

    texts = [s.text for s in read_conllu(SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu")]
    import faiss  # noqa: F401 - the libraries' own code is loaded before the measure starts
    import pyarrow.parquet  # noqa: F401
    import transformers.models.bert.modeling_bert  # noqa: F401 - the model's classes

    for lines, out in runs:
        corpus = Path(out).with_suffix(".txt")
        corpus.write_text("\n".join(texts[i % len(texts)] for i in range(lines)) + "\n", encoding="utf-8")
        in_fork(partial(measured_build, model_dir, texts, corpus, out), f"the build of {lines} lines")


def measured_build(model_dir: str, texts: list[str], corpus: Path, out: str) -> int:
    """Print 'GROWN_MB PIECES SEARCH' of one build, after the model's own working memory is paid."""
    from mha_core.analysis.index.build import build_index, text_corpus
    from mha_core.engine.forward import run
    from mha_core.engine.loading.model import load_model

    model = load_model(model_dir)
    run(model, texts[:8], path="explicit")  # the model's own working memory, paid before the build
    before = peak_mb()
    manifest = build_index(model, text_corpus(corpus), [0, 1], out)
    print(f"{peak_mb() - before:.1f} {manifest['pieces']} {manifest['search']}")
    return 0


if __name__ == "__main__":
    main(sys.argv[1], [(int(lines), out) for lines, out in zip(sys.argv[2::2], sys.argv[3::2], strict=True)])
