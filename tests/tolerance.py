"""Parity bounds relative to the tensor's scale (issue 79): an error is the largest absolute difference divided by the
largest absolute value of the reference, so that one bound holds for maps (at most 1), a BERT's hidden states (about
1) and Gemma's (scaled by √d_model and its norms' weights) alike, on any CPU's summation order.

Each bound is at least 10x the worst error measured (the house rule); MHA_TOLERANCE_LOG=<file> appends every measured
error with its call site and test, to measure them again (`python -m tests.tolerance <file>` prints the worst by
site)."""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch


def as_tensor(values: object) -> torch.Tensor:
    return values.detach().double() if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values,
                                                                                                    np.float64))


def scaled_error(ours: object, ref: object, where: object = None) -> float:
    """max |ours - ref| / max |ref|, over the entries `where` keeps (a boolean mask broadcast against them)."""
    ours, ref = as_tensor(ours), as_tensor(ref)
    error, scale = (ours - ref).abs(), ref.abs().expand_as(ours - ref)
    if where is not None:
        keep = as_tensor(where).bool().expand_as(error)
        error, scale = error[keep], scale[keep]
    return error.max().item() / max(scale.max().item(), torch.finfo(torch.float32).tiny)


def assert_close_to_scale(ours: object, ref: object, rel: float, where: object = None, what: object = "") -> float:
    """Fail where `ours` differs from `ref` by more than `rel` of the reference's largest value; returns the ratio."""
    ratio = scaled_error(ours, ref, where)
    if log := os.environ.get("MHA_TOLERANCE_LOG"):
        caller = inspect.stack()[1]
        with Path(log).open("a", encoding="utf-8") as out:
            out.write(json.dumps({"site": f"{Path(caller.filename).name}:{caller.lineno}", "ratio": ratio, "rel": rel,
                                  "test": os.environ.get("PYTEST_CURRENT_TEST", "")}) + "\n")
    assert ratio <= rel, f"{what}: max abs error / max abs of the reference = {ratio:.3g} > {rel:.3g}"
    return ratio


def worst_by_site(lines: Sequence[str]) -> dict[str, tuple[float, float, str]]:
    """site -> (worst ratio, its bound, the test that measured it) from MHA_TOLERANCE_LOG's lines."""
    worst: dict[str, tuple[float, float, str]] = {}
    for line in lines:
        row = json.loads(line)
        if row["site"] not in worst or row["ratio"] > worst[row["site"]][0]:
            worst[row["site"]] = (row["ratio"], row["rel"], row["test"])
    return worst


if __name__ == "__main__":
    for site, (ratio, rel, test) in sorted(worst_by_site(Path(sys.argv[1]).read_text().splitlines()).items()):
        print(f"{site:28} bound {rel:.0e}  worst {ratio:.2e}  margin {rel / max(ratio, 1e-30):8.1f}x  {test}")
