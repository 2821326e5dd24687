"""Issue 79: a package that installs. pyproject.toml declares its dependencies as ranges, each pin of requirements.txt
(what `make install` installs) within its range; the wheel carries the web app (app.py, views/, the assets,
Streamlit's settings) as data files, every file of those folders listed. The slow test builds the wheel and installs it
into a fresh venv that sees this environment's packages but not the checkout, its declared dependencies resolved
offline against them (--no-index: the wheel the one thing installed); from another folder it imports mha_core,
loads the bundled MiniLM and starts `mha-explorer app`, whose health check answers and whose first page loads the
bundled MiniLM and draws it."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mha_core.engine.loading.bundled import encoder_dir  # the bundled MiniLM's folder (without importing torch)
from tests.conftest import ROOT

if TYPE_CHECKING:
    from deploy.st_client import Interaction

APP_FOLDERS = ("app.py", "views", "assets", ".streamlit")  # what the wheel's data files must hold, whole
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
BUILD_FILES = ("pyproject.toml", "README.md", "mha_core", *APP_FOLDERS)


def pinned() -> dict[str, Requirement]:
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    requirements = [Requirement(line.split("#")[0]) for line in lines if line.split("#")[0].strip()]
    return {canonicalize_name(r.name): r for r in requirements}


def declared() -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, PYPROJECT["project"]["dependencies"])}


def test_every_pin_lies_within_its_declared_range():
    pins, ranges = pinned(), declared()
    assert set(pins) == set(ranges), (set(pins) ^ set(ranges))
    for name, pin in pins.items():
        version = next(iter(pin.specifier)).version
        assert ranges[name].specifier.contains(version), (name, version, str(ranges[name].specifier))
        assert ranges[name].extras == pin.extras, name


def test_the_data_files_list_every_file_of_the_app():
    listed = {Path(path) for patterns in PYPROJECT["tool"]["setuptools"]["data-files"].values()
              for pattern in patterns for path in glob.glob(pattern, root_dir=ROOT)}
    app_files = {path.relative_to(ROOT) for name in APP_FOLDERS
                 for path in ([ROOT / name] if (ROOT / name).is_file() else (ROOT / name).rglob("*"))
                 if path.is_file() and "__pycache__" not in path.parts}
    assert app_files == listed, (app_files - listed, listed - app_files)


def test_the_app_command_serves_the_checkout_s_app_and_says_when_it_has_none(monkeypatch, tmp_path, capsys):
    from mha_core.cli import app, main

    command = app.streamlit_command(8600, "127.0.0.1")
    assert command[1:4] == ["-m", "streamlit", "run"] and Path(command[4]) == ROOT / "app.py"
    assert command[5:] == ["--server.port", "8600", "--server.address", "127.0.0.1"]
    monkeypatch.setattr(app, "app_dir", lambda: tmp_path)  # an install without the app's files
    assert main(["app"]) == 2
    assert capsys.readouterr().err.strip() == f"error: the app's files are not installed: no {tmp_path / 'app.py'}"


def fresh_venv(folder: Path) -> Path:
    """A venv without pip whose site-packages sees this environment's (a .pth line: its .pth files are not run, so the
    checkout's editable mha_core stays out); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    Path(own, "project-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def copy_of_the_checkout(tmp_path: Path) -> Path:
    """The files a wheel is built from, copied (the build writes build/ and *.egg-info where it runs)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in BUILD_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    return source


def install_the_wheel(python: Path, source: Path) -> subprocess.CompletedProcess:
    """pip, run by the venv's python (pip is one of the environment's packages it sees), builds the wheel from `source`
    with this environment's setuptools and installs it, resolving its declared dependencies offline (--no-index)
    against what the venv sees: one pip start where a wheel build, a dry run and an install took three (each of the
    last two started pip twice: --python runs it again in the venv's interpreter)."""
    return subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", str(source)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.long
def test_the_wheel_installs_and_runs_from_another_folder(tmp_path):
    python = fresh_venv(tmp_path / "venv")
    installed = install_the_wheel(python, copy_of_the_checkout(tmp_path))
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert "Building wheel for mha-explorer" in installed.stdout, installed.stdout[-2000:]
    # every declared dependency found among the environment's packages: the wheel is the one thing installed
    assert installed.stdout.strip().splitlines()[-1] == "Successfully installed mha-explorer-0.1.0", installed.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    imported = subprocess.run([python, "-c", "import mha_core; from mha_core.app_files import app_dir; "
                               "from mha_core.engine.loading.dirs import resolve_model_dir as folder; "
                               "print(mha_core.load_model('all-MiniLM-L6-v2').name, mha_core.__file__, app_dir(), "
                               "folder('all-MiniLM-L6-v2'))"],
                              cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=True)
    name, package, app, minilm = imported.stdout.split()
    assert name == "all-MiniLM-L6-v2"  # the README's first example, as a researcher runs it from any folder
    assert Path(package).is_relative_to(tmp_path / "venv") and Path(app) == tmp_path / "venv/share/mha-explorer"
    assert Path(minilm) == encoder_dir()  # the name finds the bundled MiniLM, which the first page loads:
    page = serve_the_installed_app(tmp_path / "venv" / "bin" / "mha-explorer", elsewhere, env)
    # loaded with the installed mha_core (no other on the server's path) and drawn
    assert page.charts > 0 and any(text.startswith(minilm_s_shape()) for text in page.texts), page.texts


def minilm_s_shape() -> str:
    """How the first page describes the bundled MiniLM's shape, from its config.json."""
    import json

    config = json.loads((encoder_dir() / "config.json").read_text(encoding="utf-8"))
    layers, heads, width = (config[key] for key in ("num_hidden_layers", "num_attention_heads", "hidden_size"))
    return f"{layers} layers × {heads} heads · d_model {width}"


def serve_the_installed_app(command: Path, folder: Path, env: dict[str, str]) -> Interaction:
    """`mha-explorer app` started in `folder`: its health check answers and its first page runs (what it drew
    returned), then it stops."""
    from benchmarks.serving import free_port
    from deploy.warm import wait_healthy
    from tests.event_loop import run_async

    port, log = free_port(), folder / "app.log"
    with log.open("wb") as output:
        server = subprocess.Popen([command, "app", "--port", str(port), "--address", "127.0.0.1"], cwd=folder,
                                  env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", 120, server, log)
        page = run_async(first_page(f"http://127.0.0.1:{port}"))
        assert not page.exceptions and not page.errors and page.seconds > 0, (page.exceptions, page.errors)
        return page
    finally:
        server.terminate()
        server.wait(timeout=30)


async def first_page(url: str) -> Interaction:
    from deploy.st_client import Session

    session = Session(url, timeout=240)
    try:
        return await session.open()
    finally:
        await session.close()
