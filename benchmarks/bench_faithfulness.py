"""The faithfulness tables of docs/researchers/explanations.md: every explanation method on a seeded sample of the
bundled corpus (each model's own target) and of GAP's development split (the decoders: the named antecedent against
the other name), per bundled text model, through `explain --dataset` (mha_core.analysis.explain.dataset). Each
table's JSON is written to --out (a table already there is read, not rerun: run models in parallel processes, one
thread each, then once more to print every table); the tables print as markdown.
Run: .venv/bin/python benchmarks/bench_faithfulness.py [--models all-MiniLM-L6-v2,...] [--corpus-texts 20]
     [--gap-texts 8] [--threads 1] [--out /tmp/mha-faithfulness]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core.analysis.explain.choices import METHOD_NAMES, METHODS  # noqa: E402

MODELS = ("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "gemma-3-270m")
GAP_FILE = Path(__file__).resolve().parents[2] / "shared" / "data" / "gap" / "gap-development.tsv"


def computed(name: str, dataset: str, limit: int, out: Path) -> dict | None:
    """The table of `name` on `dataset` from --out, or computed and written there (None: the model reads no GAP)."""
    path = out / f"{name}-{dataset}.json"
    if path.exists():
        return json.loads(path.read_text())
    from mha_core import load_model
    from mha_core.analysis.explain.dataset import GAP, dataset_table
    from mha_core.engine.loading.model import bundled_dirs

    model = load_model(bundled_dirs()[name])
    if dataset == GAP and not model.causal:
        return None
    started = time.perf_counter()
    table = dataset_table(model, dataset, limit, GAP_FILE if dataset == GAP else None, methods=METHODS,
                          progress=lambda done, total: print(f"{name} {dataset}: {done}/{total} texts, "
                                                             f"{time.perf_counter() - started:.0f} s", flush=True))
    shown = {**table.as_json(), "wall_seconds": time.perf_counter() - started, "threads": torch.get_num_threads()}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(shown, indent=1))
    return shown


def markdown(table: dict) -> str:
    """One table: the methods from the most faithful down, with the sample it was measured on."""
    lines = [f"**{table['model']}, {table['dataset']}**: {table['explained']} texts explained ({table['skipped']} "
             f"skipped: no target to read), {table['pieces']:.0f} pieces on average, seed {table['seed']}, "
             f"Integrated Gradients {table['steps']} steps; {table['wall_seconds'] / 60:.0f} min on "
             f"{table['threads']} thread(s).", "",
             "| method | comprehensiveness (AOPC) | sufficiency (AOPC) | comp. − suff. (± s.e.) | first on | seconds |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, value in table["ranking"]:
        m = table["methods"][name]
        lines.append(f"| {METHOD_NAMES[name]} | {m['aopc_comprehensiveness']:.3f} | {m['aopc_sufficiency']:.3f} | "
                     f"{value:.3f} ± {m['standard_error']:.3f} | {m['wins']} | {m['seconds']:.2f} |")
    if table["by"] is not None:
        lines += ["", f"Most faithful: {METHOD_NAMES[table['most_faithful']]}, ahead of the second by "
                      f"{table['by']:.3f} (ahead on {table['ahead_on']} of {table['explained']} texts)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--corpus-texts", type=int, default=20)
    parser.add_argument("--gap-texts", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mha-faithfulness")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        for dataset, limit in (("corpus", args.corpus_texts), ("gap", args.gap_texts)):
            table = computed(name, dataset, limit, args.out)
            if table is not None:
                print(markdown(table) + "\n", flush=True)


if __name__ == "__main__":
    main()
