"""The CLI run inside a test process (tests.conftest.cli) on the bundled models that process already holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def cli_reads_held_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`python -m mha_core` run in this process chooses its model as the program does (load_chosen_model: the name,
    its refusal, the folder), and its load_model of a bundled folder gives the copy this process's pages and fixtures
    hold (tests.conftest.app_model): Gemma 3 took 2.6 s of a core at each CLI call, loaded again for every command
    of a test. Any other folder (a tiny model, --model-dir) is loaded as before; tests/test_cli.py runs the program
    itself, its own loads included."""
    from mha_core.engine.loading import model
    from mha_core.engine.loading.dirs import bundled_dirs
    from tests.conftest import app_model

    real, held = model.load_model, {folder.resolve(): folder for folder in bundled_dirs().values()}

    def load(model_dir: str | Path | None = None, device: str = "cpu", dtype: object = None) -> object:
        folder = None if model_dir is None else held.get(Path(model_dir).resolve())
        if folder is None or dtype is not None or str(device) != "cpu":
            return real(model_dir, device, dtype)
        return app_model(folder)

    monkeypatch.setattr(model, "load_model", load)
    yield
