"""Vision Transformers: an image cut into patches that become tokens ("an image is worth 16×16 words"), then the one
layer loop of every family. What differs per family is described here, as arch.py describes the text families:

| family                 | tokens before the patches     | norm placement | layer scale | MLP            | final norm |
|------------------------|-------------------------------|----------------|-------------|----------------|------------|
| vit                    | [CLS]                         | pre            | no          | GELU           | yes        |
| deit                   | [CLS], [DIST] (distillation)  | pre            | no          | GELU           | yes        |
| dinov2                 | [CLS]                         | pre            | λ per sub-layer | GELU or SwiGLU | yes    |
| dinov2_with_registers  | [CLS], registers              | pre            | λ per sub-layer | GELU or SwiGLU | yes    |
| clip_vision_model      | [CLS]; a norm after the embeddings (pre_layrnorm) | pre | no | quick GELU | no  |
A `clip` checkpoint is read as its vision tower. The patch embedding (a convolution, stride = patch size), the
class token, registers and the position embeddings (interpolated for another resolution) are transformers' own
embedding module, called as is: the recompute starts at the first layer's input.

Shapes: B images, C channels, Hpx × Wpx pixels, P patch size, R × Q patches (rows × columns), N = prefix + R·Q
tokens, D d_model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from mha_core.engine.arch import LONG_MAX_PIECES, Architecture, first
from mha_core.engine.tokens import TokenBatch, pad_mask
from mha_core.engine.weights import EmbeddingWeights, LayerWeights, MlpWeights, linear, norm_of, projections

DINO = ("dinov2", "dinov2_with_registers")
DEFAULT_SIDE = 224  # pixels a side when the model folder's processor does not say
MAX_SIDE = 518  # the largest side an image is read at (DINOv2: 37 × 37 = 1,369 patches of 14 px)


def vision_config(config: object) -> object:
    """The config of the vision stack: a `clip` checkpoint's vision_config, else the config itself."""
    return config.vision_config if config.model_type == "clip" else config


def prefix_names(config: object) -> tuple[str, ...]:
    """The tokens before the patches, in order: [CLS], DeiT's distillation token, DINOv2's registers."""
    registers = int(getattr(config, "num_register_tokens", 0) or 0) if config.model_type in DINO else 0
    return ("[CLS]", *(("[DIST]",) if config.model_type == "deit" else ()), *(f"[REG {i}]" for i in range(registers)))


def describe_vision(config: object) -> Architecture:
    """The description of a vision stack (model_type checked before)."""
    family, vision = config.model_type, vision_config(config)
    d_model, n_heads = int(vision.hidden_size), int(vision.num_attention_heads)
    n_layers = int(vision.num_hidden_layers)
    patch, side = int(vision.patch_size), int(first(vision, "image_size", default=DEFAULT_SIDE))
    prefix = len(prefix_names(config if family != "clip" else vision))
    most = prefix + (max(side, MAX_SIDE) // patch) ** 2
    swiglu = bool(getattr(vision, "use_swiglu_ffn", False))
    return Architecture(
        family=family, causal=False, norm="layer", pre_norm=True, rotary=False, position_offset=0,
        token_types=False, gated_mlp=swiglu, activation="silu" if swiglu else str(vision.hidden_act),
        n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_heads, d_model=d_model, head_dim=d_model // n_heads,
        max_length=min(most, LONG_MAX_PIECES), long_max_length=min(most, LONG_MAX_PIECES),
        norm_eps=float(first(vision, "layer_norm_eps", default=1e-12)), windows=(None,) * n_layers,
        rope_kinds=(None,) * n_layers, image=True, layer_scale=family in DINO, patch_size=patch, image_size=side,
        n_prefix=prefix,
    )


def vision_module(model: torch.nn.Module) -> torch.nn.Module:
    """The vision stack of a loaded model: CLIPModel's vision_model, else the model itself."""
    return getattr(model, "vision_model", model)


def vision_layer(layer: torch.nn.Module, arch: Architecture) -> LayerWeights:
    """One layer of any vision family: q/k/v projections, o_proj (CLIP: out_proj), fc1/fc2 (DINOv2: or SwiGLU),
    the two norms under their family's names, DINOv2's layer scales."""
    a = getattr(layer, "attention", None) or layer.self_attn
    out = getattr(a, "o_proj", None) or a.out_proj
    attention = projections(linear(a.q_proj), linear(a.k_proj), linear(a.v_proj), linear(out), arch)
    m = layer.mlp
    if arch.gated_mlp:  # DINOv2's SwiGLU: down(silu(gate x) * up x), every projection biased
        (w_up, b_up), (w_gate, b_gate), (w_down, b_down) = linear(m.up_proj), linear(m.gate_proj), linear(m.down_proj)
        mlp = MlpWeights(w_up, b_up, w_gate, w_down, b_down, arch.activation, b_gate)
    else:
        mlp = MlpWeights(*linear(m.fc1), None, *linear(m.fc2), arch.activation)
    first_norm, second_norm = (getattr(layer, name) for name in norm_names(layer))
    scales = (layer.layer_scale1.lambda1.detach(), layer.layer_scale2.lambda1.detach()) if arch.layer_scale else (
        None, None)
    return LayerWeights(attention, norm_of(first_norm, False), mlp, norm_of(second_norm, False),
                        attn_scale=scales[0], mlp_scale=scales[1])


def norm_names(layer: torch.nn.Module) -> tuple[str, str]:
    """The two norms of a layer: ViT's and DeiT's layernorm_before/after, DINOv2's norm1/2, CLIP's layer_norm1/2."""
    for names in (("layernorm_before", "layernorm_after"), ("norm1", "norm2"), ("layer_norm1", "layer_norm2")):
        if hasattr(layer, names[0]):
            return names
    raise ValueError(f"no known norms in {type(layer).__name__}")


def stack_layers(stack: torch.nn.Module) -> torch.nn.ModuleList:
    """ViT's and DeiT's `layers`, DINOv2's encoder.layer, CLIP's encoder.layers."""
    encoder = getattr(stack, "encoder", None)
    return getattr(stack, "layers", None) or getattr(encoder, "layer", None) or encoder.layers


def read_vision(model: torch.nn.Module, arch: Architecture) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    """The embeddings (transformers' module, CLIP's norm after it) and every layer of a vision stack."""
    stack = vision_module(model)
    pre = getattr(stack, "pre_layrnorm", None)
    final = getattr(stack, "layernorm", None)
    word = stack.embeddings.patch_embeddings.projection.weight if hasattr(stack.embeddings, "patch_embeddings") else (
        stack.embeddings.patch_embedding.weight)
    embeddings = EmbeddingWeights(word.detach(), None, None, None if pre is None else norm_of(pre, False),
                                  None if final is None else norm_of(final, False),
                                  patches=patch_embedder(stack.embeddings, arch))
    return embeddings, tuple(vision_layer(layer, arch) for layer in stack_layers(stack))


def patch_embedder(module: torch.nn.Module, arch: Architecture) -> Callable[[Tensor], Tensor]:
    """pixel values (B,C,Hpx,Wpx) -> (B,N,D): transformers' embedding module, positions interpolated to the image's
    size (DINOv2 always interpolates; ViT, DeiT and CLIP when asked)."""
    if arch.family in DINO:
        return lambda pixels: module(pixels)
    return lambda pixels: module(pixels, interpolate_pos_encoding=True)


def patch_grid(pixels: Tensor, patch: int) -> tuple[int, int]:
    """(rows, columns) of patches of an image batch (B,C,Hpx,Wpx)."""
    return pixels.shape[-2] // patch, pixels.shape[-1] // patch


def image_batch(pixels: Tensor, arch: Architecture, prefix: tuple[str, ...], names: tuple[str, ...] = ()
                ) -> TokenBatch:
    """Images (B,C,Hpx,Wpx), already prepared, as a batch whose "pieces" are the prefix tokens then the patches,
    row by row ("patch r,c")."""
    rows, columns = patch_grid(pixels, arch.patch_size)
    labels = (*prefix, *(f"patch {r},{c}" for r in range(rows) for c in range(columns)))
    b, n = pixels.shape[0], len(labels)
    return TokenBatch(
        texts=names or ("",) * b, input_ids=torch.zeros(b, n, dtype=torch.long), attention_mask=pad_mask([n] * b),
        tokens=(labels,) * b, labels=(labels,) * b, word_ids=(tuple(range(n)),) * b, offsets=(((0, 0),) * n,) * b,
        n_tokens=(n,) * b, features=pixels, grid=(rows, columns),
    )
