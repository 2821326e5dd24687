"""Every cache a server process holds, in one list with its bytes (issue 80): the loaded models (MODELS: the
pages' models, MODELS_KEPT of them, least recently used out first), the Server's shared stores, and every cache of
the floors below, which register with mha_core.engine.held (a function's kept values, a prompt start's keys and
values, the opened indexes, the spaCy pipeline). held() lists them; serving.memory plans for them.

A model's bytes are its tensors' (each storage once: the transformers modules, the plain tensors read from them, the
language-model head's own tensors); its tokenizer's are a stated estimate (TOKENIZER_PER_FILE_BYTE).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from mha_core.engine.held import Held, registered, tensor_bytes
from mha_core.engine.loading.folder import ModelLoadError
from mha_core.engine.loading.model import LoadedModel, load_model
from mha_core.figures import charts  # noqa: F401 - every cache of the floors below registers as its module loads
from mha_core.serving.computed import index, seq2seq, text, translation  # noqa: F401
from mha_core.serving.memory import MODELS_KEPT
from mha_core.serving.server import Server
from mha_core.serving.store import SharedStore

MODELS_NAME, TOKENIZERS_NAME = "models", "tokenizers"
TOKENIZER_PER_FILE_BYTE = 10  # a fast tokenizer loaded holds about 10x its tokenizer.json (RSS growth measured: 3x
#                               Whisper's, 9x Gemma 3's, 11x MiniLM's): a stated estimate


def model_bytes(models: Iterable[object]) -> int:
    """The tensors held by loaded models (each storage once, shared ones between models too): their transformers
    modules' parameters and buffers, and every tensor of the LoadedModel (plain weights, the head's own tensors)."""
    seen: set[int] = set()
    total = 0
    for loaded in models:
        if isinstance(loaded, LoadedModel):
            module = loaded.model
            total += tensor_bytes([*module.parameters(), *module.buffers()], seen)
            total += tensor_bytes(tensors_of(loaded), seen)
    return total


def tensors_of(value: object, depth: int = 0) -> Iterable[object]:
    """Every tensor reachable from a LoadedModel's fields (its embeddings, layers, head tensors, decoder stack)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)) and depth < 8:
        for item in value:
            yield from tensors_of(item, depth + 1)
    elif hasattr(value, "__dataclass_fields__") and depth < 8:
        for name in value.__dataclass_fields__:
            field = getattr(value, name)
            if not isinstance(field, torch.nn.Module):  # the modules' tensors are counted from the module
                yield from tensors_of(field, depth + 1)


class Models:
    """The loaded models of a process by folder: each loaded once (visitors asking at once wait for one load), or why
    it cannot be used (kept too, so a bad folder is not reloaded on every rerun); `kept` at most."""

    def __init__(self, kept: int = MODELS_KEPT, load: Callable[[str], LoadedModel] | None = None) -> None:
        self.store = SharedStore(kept)
        self.load = load or (lambda folder: load_model(folder, device=os.environ.get("MHA_DEVICE", "cpu")))

    def holds(self, model_dir: str) -> bool:
        """Whether `model_dir` is loaded (or refused) now: asking for it will not load it."""
        return model_dir in self.store

    def get(self, model_dir: str, after_load: Callable[[], None] = lambda: None) -> LoadedModel | ModelLoadError:
        def loaded() -> LoadedModel | ModelLoadError:
            try:
                model = self.load(model_dir)
            except ModelLoadError as err:
                return err
            after_load()
            return model

        return self.store.get(model_dir, loaded)

    def held(self) -> tuple[Held, Held]:
        """The models' tensors (measured), and their tokenizers (estimated from their files)."""
        values = [value for value in self.store.values() if isinstance(value, LoadedModel)]
        tokenizers = [model.model_dir / "tokenizer.json" for model in values if model.tokenizer is not None]
        estimate = sum(path.stat().st_size for path in tokenizers if path.is_file()) * TOKENIZER_PER_FILE_BYTE
        return (Held(MODELS_NAME, len(values), model_bytes(values), True),
                Held(TOKENIZERS_NAME, len(tokenizers), estimate, False))


MODELS = Models()  # the process's models: every page reads them through views/_state.listed_model


def store_held(name: str, store: SharedStore) -> Held:
    """A shared store's entries and the bytes it weighs them at (store.nbytes: tensors, arrays and strings)."""
    return Held(f"store: {name}", len(store), store.total_bytes, True)


def held(server: Server | None = None, models: Models = MODELS) -> tuple[Held, ...]:
    """Every cache this process holds now, with its bytes: the models, the stores of `server` (default: of every
    Server alive in the process, the app's one), and every cache registered by the floors below
    (mha_core.engine.held)."""
    servers = [server] if server is not None else list(Server.alive)
    stores = tuple(store_held(name if len(servers) == 1 else f"{name} ({k})", store)
                   for k, each in enumerate(servers) for name, store in each.stores.items())
    return (*models.held(), *stores, *registered())


def held_bytes(server: Server | None = None, models: Models = MODELS) -> int:
    """held()'s bytes together."""
    return sum(cache.bytes for cache in held(server, models))
