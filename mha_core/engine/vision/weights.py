"""A Vision Transformer's weights read into plain tensors (engine/arch.py describes each vision family): transformers'
own embedding module (the patch convolution, the class token, registers, the positions interpolated for another
resolution) called as is, then every layer's projections, norms and MLP for the one layer loop.

Shapes: D d_model, F feed-forward width, B images, C channels, Hpx × Wpx pixels, N tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from mha_core.engine.arch import Architecture
from mha_core.engine.weights import EmbeddingWeights, LayerWeights, MlpWeights, linear, norm_of, projections


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
    if not arch.asks_interpolation:
        return lambda pixels: module(pixels)
    return lambda pixels: module(pixels, interpolate_pos_encoding=True)
