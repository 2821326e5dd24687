"""The language-model head's tensors that the base model leaves out (a decoder's untied unembedding, an encoder's
masked-LM head), read from the folder's safetensors when the model loads: checked as every other weight (finite,
of the config's width), on the model's device and dtype, and held by the LoadedModel, so they count in its bytes and
go when it goes (mha_core.analysis.lm.head builds the head from them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor

from mha_core.engine.arch import Architecture
from mha_core.engine.loading.checks import NOT_FINITE, SIZE_MISMATCH, all_finite
from mha_core.engine.loading.folder import ModelLoadError, shown

if TYPE_CHECKING:
    from transformers import PretrainedConfig

HeadTensors = tuple[tuple[str, Tensor], ...]  # (name in the folder, tensor): a tuple, so a LoadedModel stays hashable


def head_names(arch: Architecture, config: PretrainedConfig) -> tuple[str, ...]:
    """The tensors of the model's head that the base model does not load: none for a tied decoder."""
    if arch.causal:
        return () if getattr(config, "tie_word_embeddings", False) else (arch.unembedding,)
    names = arch.masked_head
    if names is None:
        return ()
    dense, norm, decoder = names.dense, names.norm, names.decoder
    return (f"{dense}.weight", f"{dense}.bias", f"{norm}.weight", f"{norm}.bias", f"{decoder}.weight", names.bias,
            f"{decoder}.bias")


def read_head(path: Path, arch: Architecture, config: PretrainedConfig, like: Tensor) -> HeadTensors:
    """The head's tensors the folder holds (those it lacks are left out: lm.head then has no head), checked, on
    `like`'s (the word embeddings') device and dtype."""
    from safetensors import safe_open

    wanted, found = set(head_names(arch, config)), {}
    for file_path in sorted(path.glob("*.safetensors")) if wanted else ():
        with safe_open(str(file_path), framework="pt") as file:
            for name in wanted & set(file.keys()):
                found[name] = check_head_tensor(file.get_tensor(name), name, arch, path)
    return tuple((name, tensor.to(device=like.device, dtype=like.dtype)) for name, tensor in sorted(found.items()))


def check_head_tensor(tensor: Tensor, name: str, arch: Architecture, path: Path) -> Tensor:
    """A head's tensor finite, and a weight matrix as wide as the model (its rows: vocabulary pieces or d_model)."""
    if tensor.is_floating_point() and not all_finite(tensor):
        raise ModelLoadError("weights_not_finite", NOT_FINITE, path=shown(path), name=name[:80])
    if tensor.ndim == 2 and tensor.shape[1] != arch.d_model or tensor.ndim not in (1, 2):
        raise ModelLoadError("weights_size_mismatch", SIZE_MISMATCH, path=shown(path))
    return tensor
