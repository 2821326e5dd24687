"""Shared fixtures: the real bundled model (parity) and a tiny random BERT (fast unit tests)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.class_stores import class_store, redis_address  # noqa: F401 -- fixtures of every test file
from tests.tier_tools import shadow_undeclared_tools

if TYPE_CHECKING:  # torch, transformers, Streamlit and mha_core load in the processes that run tests
    import numpy as np  # (set_up_test_process), never in pytest-xdist's controller, which runs none

    from mha_core import LoadedModel

# The machine's own Hugging Face cache stays out of the model list (a developer's models would change what pages
# and lists show); tests of the cache listing turn it on with a cache of their own (tests/test_hf_cache.py).
os.environ["MHA_HF_CACHE"] = "0"
# A tier of make test sees only the Debian tools its Makefile target installs (tests/tier_tools.py).
shadow_undeclared_tools()
# The class store of a test process is its own (the browser tier's app server inherits it), and each test's its own
# (the autouse fixture below): classes started by earlier runs in the user's cache count towards a server's cap.
os.environ["MHA_CLASS_STORE"] = os.path.join(tempfile.mkdtemp(prefix="mha-classes-"), "classes.sqlite")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
ANIMAL_TIRED = "The animal didn't cross the street because it was too tired."
ANIMAL_WIDE = "The animal didn't cross the street because it was too wide."


@dataclass(frozen=True)
class CliRun:
    """What a user of `python -m mha_core ARGS` sees: the exit status, stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def cli(*args: str) -> CliRun:
    """`python -m mha_core ARGS`, run in this process: the same main() (test_cli.py runs the program itself once),
    without starting Python and importing torch for every call. A crash shows as a traceback on stderr and status
    1, as it would in a process of its own."""
    import contextlib
    import io
    import traceback

    from mha_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except Exception:  # noqa: BLE001 -- reported as the program would report it
            traceback.print_exc()
            code = 1
    return CliRun(code, out.getvalue(), err.getvalue())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on the bundled decoders (30-layer SmolLM2, Gemma 3) and the bundled Whisper belong to make test-slow,
    not to the fast tier (make check); slow, browser and serving tests run first."""
    for item in items:
        if {"decoder", "gemma", "whisper"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # The long tests first (the same order in every process, as pytest-xdist requires): the test processes take the
    # short ones from each other at the end instead of waiting on one long test started last. Within a tier, the
    # tests marked long are dealt to each process's share once -m has chosen the tier's tests (tests/scheduling.py).
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in ("slow", "browser", "serve")))
    from tests.scheduling import misplaced

    if wrong := misplaced(items):
        raise pytest.UsageError("\n".join(wrong))


def pytest_configure(config: pytest.Config) -> None:
    from tests import scheduling

    config.pluginmanager.register(scheduling, "tests.scheduling")
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        set_up_test_process()


def set_up_test_process() -> None:
    """What a process that runs tests needs, done before it collects them: pytest-xdist's controller runs none and
    skips it. pytest -n N: N processes share the cores, so torch's and BLAS's own threads would spin against each
    other (twice the CPU time for the same tests): one thread each, in child processes too. torch, OpenMP and
    OpenBLAS read the variables when they load, so a process whose tests never import them (the browser tier's)
    does not import them here (torch alone took 1.5 s of each process's start). The pages' model cache keeps every
    model a test process opens (the five bundled, the tiny ones of its tests), as a server with the memory would:
    with the default three, the slow tier's processes loaded Gemma 3 eight times (1.5 s of its tokenizer each) and
    Whisper nine, while the tests' own fixtures held the copies evicted."""
    os.environ.setdefault("MHA_MODELS_KEPT", "16")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        if "torch" in sys.modules:  # loaded already (by a plugin): told instead
            sys.modules["torch"].set_num_threads(1)
        if "numpy" in sys.modules:
            from threadpoolctl import threadpool_limits

            threadpool_limits(1)
    import tests.app_patches  # noqa: F401 - AppTest's media files kept, components scanned once


@pytest.fixture(autouse=True)
def fast_tests_load_no_bundled_decoder(request: pytest.FixtureRequest,
                                       monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """make check stays within its 2 minutes: a test of the fast tier that loads a bundled decoder or Whisper fails,
    naming it (a page in Chinese opens on Gemma 3, 1 GB, converted on a fresh machine's first use: choose the model
    the test reads, or mark it slow). Each test process loads a model once, so the first such test is caught."""
    if any(request.node.get_closest_marker(tier) for tier in ("slow", "browser", "serve")):
        yield
        return
    from mha_core.engine.loading import model
    from mha_core.engine.loading.bundled import DECODER_NAME, GEMMA_NAME, WHISPER_NAME

    real, loaded = model.check_model_dir, []

    def watched(path: Path) -> dict:  # load_model checks every folder it loads, first
        if path.name in (DECODER_NAME, GEMMA_NAME, WHISPER_NAME):
            loaded.append(path.name)
        return real(path)

    monkeypatch.setattr(model, "check_model_dir", watched)
    yield
    assert not loaded, f"a test of the fast tier loaded {loaded}: read a small model, or mark the test slow"


@pytest.fixture(scope="session", autouse=True)
def _shared_chromium_closes() -> Iterator[None]:
    """The test process's one Chromium (tests/browser.shared_browser), if a test started it, ends with the session."""
    yield
    import sys

    browser_helpers = sys.modules.get("tests.browser")  # never imported: no browser test ran here
    if browser_helpers is not None:
        browser_helpers.close_shared_browser()


@pytest.fixture(scope="session")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `streamlit run` for the run's test processes, shared by the browser tests (each opens its own sessions; a
    test of a fresh server's first request starts its own): tests/browser.server_for_the_run."""
    from tests.browser import server_for_the_run

    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    with server_for_the_run(shared) as url:
        yield url


def app_model(folder: Path) -> LoadedModel:
    """A bundled model as the app's pages load it (views/_state.listed_model, kept per process): a test and the
    pages it opens read one copy, loaded once per test process instead of twice."""
    from mha_core import LoadedModel
    from views._state import listed_model

    loaded = listed_model(str(folder))
    assert isinstance(loaded, LoadedModel), loaded
    return loaded


@pytest.fixture(scope="session")
def bundled() -> LoadedModel:
    from mha_core.engine.loading.model import bundled_model_dir

    return app_model(bundled_model_dir())


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 4-head, d_model 32 BERT with random weights and the bundled tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mha_core.engine.loading.model import bundled_model_dir

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    )
    path = tmp_path_factory.mktemp("tiny-bert")
    BertModel(config).save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny(tiny_dir: Path) -> LoadedModel:
    from mha_core import load_model

    return load_model(tiny_dir)


def wait_for(condition: Callable[[], object], seconds: float, poll_s: float = 0.2) -> bool:
    """Whether condition() came true within `seconds`, checked every poll_s: a test waits for what must happen, never
    for a fixed time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(poll_s)
    return False


def long_text(n_words: int) -> str:
    """Varied English prose of about n_words words."""
    base = (
        "Researchers study how attention heads in a transformer distribute weight across tokens, "
        "and whether some heads track syntax, coreference, or simple positions in the sentence."
    )
    words = base.split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def open_app(page: str | None = None, **query: str) -> object:
    """AppTest of the app, optionally switched to `page` (e.g. "views/roles.py"), with URL query params."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for key, value in query.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    return at.run()


def download(at: object, label: str) -> bytes:
    """The bytes a page's download button named `label` gives (a deferred one's callable run as a click runs it),
    read from the media files of AppTest's last run (KeptMediaFiles)."""
    from tests.app_patches import KeptMediaFiles

    (button,) = [b for b in at.get("download_button") if b.proto.label == label]
    files = KeptMediaFiles.latest
    url = files.execute_deferred(button.proto.deferred_file_id) if button.proto.deferred_file_id else button.proto.url
    return files.read_file(url.rsplit("/", 1)[-1]).content


@lru_cache(maxsize=1)
def transformers_encoder() -> tuple[object, object]:
    """transformers' own BertModel of the bundled encoder (eager attention) and its tokenizer, loaded once per test
    process: the independent reference of the pages' and the CLI's numbers (a hook put on it is removed after)."""
    from transformers import AutoModel, AutoTokenizer

    from mha_core.engine.loading.model import bundled_model_dir

    folder = bundled_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return AutoModel.from_pretrained(folder, attn_implementation="eager", local_files_only=True).eval(), tokenizer


def transformers_attentions(text: str) -> tuple[np.ndarray, list[str]]:
    """(L,H,T,T) transformers' own attentions of the bundled encoder, and its tokens."""
    import torch

    model, tokenizer = transformers_encoder()
    enc = tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        maps = model(**enc, output_attentions=True).attentions
    return torch.cat(maps).numpy(), tokenizer.convert_ids_to_tokens(enc.input_ids[0])


def chart_json(at: object, key: str) -> dict:
    import json

    for c in at.get("plotly_chart"):
        if key in c.proto.id:
            return json.loads(c.proto.spec)
    raise AssertionError(f"no chart {key}")


def decode(z: object) -> np.ndarray:
    """A chart's array as floats, whether plotly sent it as a base64 typed array or a list."""
    from mha_core.figures.spec import array_of

    return array_of(z).astype(float)


@pytest.fixture(scope="session")
def bad_model_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> dict[str, Path]:
    """Model folders a careless server owner might list: each must give one sentence, never a traceback."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("bad-models")
    folders = {}

    def folder(name: str, config: str | None = None, weights: bytes | None = None, tokenizer: bool = True) -> None:
        path = root / name
        path.mkdir()
        (path / "config.json").write_text(config if config is not None else (tiny_dir / "config.json").read_text())
        if weights is None:
            shutil.copy(tiny_dir / "model.safetensors", path)
        else:
            (path / "model.safetensors").write_bytes(weights)
        if tokenizer:
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(tiny_dir / f, path)
        folders[name] = path

    for name, config in (("config-list", "[1, 2]"), ("config-null", "null"), ("config-string", '"bert"'),
                         ("config-broken", "{not json"), ("unknown-type", '{"model_type": "pegasus"}'),
                         ("custom-code", '{"model_type": "llama", "auto_map": {"AutoModel": "modeling_x.M"}}')):
        folder(name, config)
    folder("garbage-weights", weights=b"\xff" * 64)
    mismatched = json.loads((tiny_dir / "config.json").read_text())
    mismatched.update(hidden_size=64, intermediate_size=128)
    folder("sizes-mismatch", json.dumps(mismatched))
    folder("no-tokenizer", tokenizer=False)
    return folders


def bundled_model(name: str) -> LoadedModel:
    """A bundled model (converted on first use), the one copy the app's pages in this test process use too."""
    from mha_core.engine.loading.model import bundled_dirs

    return app_model(bundled_dirs()[name])


@pytest.fixture(scope="session")
def decoder() -> LoadedModel:
    """The bundled SmolLM2-135M-Instruct (converted from GGUF on first use)."""
    from mha_core.engine.loading.bundled import DECODER_NAME

    return bundled_model(DECODER_NAME)


def converted(name: str) -> Path:
    """A bundled model's folder, converted on first use as the app converts it, without loading the model into the
    test process: for a browser test, which reads what the app's server shows."""
    from mha_core.engine.loading import bundled

    return bundled.ensure(next(b for b in bundled.BUNDLES if b.name == name))


@pytest.fixture(scope="session")
def gemma() -> LoadedModel:
    """The bundled Gemma 3 270M (assembled from its chunk packages and converted from GGUF on first use)."""
    from mha_core.engine.loading.bundled import GEMMA_NAME

    return bundled_model(GEMMA_NAME)


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random model of every supported family (tests/tiny_models.py), by family name."""
    from tests.tiny_models import CONFIGS, make_tiny

    root = tmp_path_factory.mktemp("families")
    return {family: make_tiny(family, root / family) for family in CONFIGS}


@pytest.fixture(scope="session")
def lm_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny causal LMs (tests/lm_models.py), built once per test process."""
    from tests.lm_models import build_lms

    return build_lms(tmp_path_factory)


@pytest.fixture(scope="session")
def mlm_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny encoders with masked-LM heads (tests/lm_models.py), built once per test process."""
    from tests.lm_models import build_mlms

    return build_mlms(tmp_path_factory)


def corpus_uploader(at: object, index: int = 0) -> object:
    """A page's index-th file uploader after the sentence box's own (.txt into the box, key "text_file")."""
    return [u for u in at.get("file_uploader") if "text_file" not in u.proto.id][index]


@pytest.fixture(autouse=True)
def own_class_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's classes in a store of its own: AppTests share one visitor, whose classes count towards its cap."""
    monkeypatch.setenv("MHA_CLASS_STORE", str(tmp_path_factory.mktemp("classes") / "classes.sqlite"))
