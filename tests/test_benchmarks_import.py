"""The benchmark scripts (make bench, never run by the test suite: their ratios are measured side by side, not
asserted) still import what they time: an API change in mha_core that leaves one behind fails here."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted([*(ROOT / "benchmarks").glob("bench_*.py"), ROOT / "benchmarks" / "cuda_check.py"])


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_a_benchmark_imports_what_it_times(script):
    spec = importlib.util.spec_from_file_location(f"benchmarks.{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: a dataclass's string annotations are looked up there
    try:
        spec.loader.exec_module(module)  # imports only: each script runs under `if __name__ == "__main__"`
    finally:
        del sys.modules[spec.name]
    assert callable(module.main)
