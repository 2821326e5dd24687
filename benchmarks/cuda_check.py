"""The fused path on a CUDA device, in one run (docs: GPU): which SDPA kernel each path ran, both paths against
transformers' eager attention for every family's tiny random model (tests/tiny_models.py, padding in the batch),
the same for the bundled models' shapes at 512 pieces in float32 and bfloat16, then bench_core's ratios.

Run: python benchmarks/cuda_check.py [--shapes DIR] [--device cuda] [--repeats N]
--shapes: a folder of model folders; each holds a model's config.json and tokenizer, and random weights are made
from its config where it has none (a device machine has no bundled packages; the ratios depend on shapes, not on
values). Default: the bundled models themselves.
Prints one line per check: the largest difference over real rows and columns, and the backend that ran.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
import traceback
from functools import partial
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import bench_core  # noqa: E402
from mha_core.engine.forward import run  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs, for_long_texts, load_model, model_class  # noqa: E402
from mha_core.engine.seq2seq.forward import forward_seq2seq, target_batch, target_ids  # noqa: E402
from mha_core.engine.seq2seq.frames import frames_batch  # noqa: E402
from mha_core.engine.tokens import tokenize  # noqa: E402
from mha_core.engine.vision.images import run_images  # noqa: E402
from mha_core.engine.vision.weights import vision_module  # noqa: E402
from tests import tiny_models  # noqa: E402

TEXTS = ["The animal didn't cross the street because it was too tired.", "A short one."]  # padding in the batch
TARGETS = ["Das Tier ging nicht.", "Kurz."]
PATHS = ("explicit", "fused")


def worst(ours: list[torch.Tensor], theirs: tuple, rows: torch.Tensor, cols: torch.Tensor) -> float:
    """The largest difference over real query rows (B,T) and key columns (B,S), across layers."""
    real = (rows[:, None, :, None] & cols[:, None, None, :]).to(ours[0].device)  # (B,1,T,S)
    return max(((o.float() - t.float()).abs() * real).max().item() for o, t in zip(ours, theirs, strict=True))


def maps(stack) -> list[torch.Tensor]:
    return [stack.layer_maps(layer) for layer in range(stack.n_layers)]  # L x (B,H,T,S)


def text_family(model, texts: list[str] | str = TEXTS) -> list[str]:
    device = model.device
    lines = []
    for path in PATHS:
        result = run(model, texts, path=path)
        mask = result.batch.attention_mask.to(device)  # (B,T)
        with torch.inference_mode():
            ref = model.model(input_ids=result.batch.input_ids.to(device), attention_mask=mask, output_attentions=True)
        real = mask.bool()
        hidden = (result.last_hidden_state.float() - ref.last_hidden_state.float()).abs()[real].max().item()
        lines.append(f"{path:>8}: maps {worst(maps(result), ref.attentions, real, real):.2e}, last hidden "
                     f"{hidden:.2e}, backend {result.backend}")
    return lines


def tiny_text_family(folder: Path, family: str, device: str) -> list[str]:
    return text_family(load_model(folder, device=device))


def seq2seq_family(folder: Path, family: str, device: str) -> list[str]:
    model = load_model(folder, device=device)
    if family == "whisper":
        torch.manual_seed(1)
        source = frames_batch(torch.randn(2, model.config.num_mel_bins, 2 * model.config.max_source_positions))
    else:
        source = tokenize(model.tokenizer, TEXTS, model.max_length)
    target = target_batch(model, [target_ids(model, t) for t in TARGETS])
    inputs = {"input_features": source.features.to(device)} if source.features is not None else {
        "input_ids": source.input_ids.to(device), "attention_mask": source.attention_mask.to(device)}
    with torch.inference_mode():
        ref = model.model(**inputs, decoder_input_ids=target.input_ids.to(device),
                          decoder_attention_mask=target.attention_mask.to(device), output_attentions=True)
    s, t = source.attention_mask.bool(), target.attention_mask.bool()
    lines = []
    for path in PATHS:
        result = forward_seq2seq(model, source, target, path)
        lines.append(f"{path:>8}: encoder {worst(maps(result.encoder), ref.encoder_attentions, s, s):.2e}, decoder "
                     f"{worst(maps(result.decoder), ref.decoder_attentions, t, t):.2e}, cross "
                     f"{worst(maps(result.cross), ref.cross_attentions, t, s):.2e}, backend {result.decoder.backend}")
    return lines


def vision_family(folder: Path, family: str, device: str) -> list[str]:
    model = load_model(folder, device=device)
    torch.manual_seed(1)
    pixels = torch.randn(2, 3, 48, 48)
    resize = {} if model.arch.layer_scale else {"interpolate_pos_encoding": True}
    with torch.inference_mode():
        ref = vision_module(model.model)(pixel_values=pixels.to(device), output_attentions=True, **resize)
    lines = []
    for path in PATHS:
        result = run_images(model, pixels, path=path)
        every = torch.ones(result.attention().shape[:1] + result.attention().shape[-1:], dtype=torch.bool)  # (B,N)
        lines.append(f"{path:>8}: maps {worst(maps(result), ref.attentions, every, every):.2e}, backend "
                     f"{result.backend}")
    return lines


def families(device: str, scratch: Path) -> None:
    print("== every family's tiny random model, float32, two texts of different lengths (padding)")
    kinds = ((tiny_models.CONFIGS, tiny_models.make_tiny, tiny_text_family),
             (tiny_models.SEQ2SEQ_CONFIGS, tiny_models.make_tiny_seq2seq, seq2seq_family),
             (tiny_models.VISION_CONFIGS, tiny_models.make_tiny_vision, vision_family))
    for configs, make, check in kinds:
        for family in configs:
            checked(family, partial(made_and_checked, make, check, family, scratch / family, device))


def made_and_checked(make, check, family: str, folder: Path, device: str) -> list[str]:
    """A family's tiny model made in `folder`, then checked on the device."""
    return check(make(family, folder), family, device)


def checked(name: str, check) -> None:
    """One check's lines, or its error: one failing family does not hide the others."""
    try:
        lines = check()
    except Exception:  # noqa: BLE001 - a device run reports every failure and goes on
        print(f"{name}: FAILED\n{traceback.format_exc(limit=4)}", flush=True)
        return
    for line in lines:
        print(f"{name} {line}", flush=True)


def shaped_folders(shapes: Path | None, scratch: Path) -> dict[str, Path]:
    """The bundled models, or for each folder under `shapes` a copy with random weights made from its config."""
    if shapes is None:
        return bundled_dirs()
    from transformers import AutoConfig

    folders = {}
    for source in sorted(p for p in shapes.iterdir() if (p / "config.json").exists()):
        folder = scratch / source.name
        shutil.copytree(source, folder)
        for packed in folder.glob("*.gz"):  # a large tokenizer travels gzipped
            packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
            packed.unlink()
        config = AutoConfig.from_pretrained(folder)
        torch.manual_seed(0)
        model_class(config).from_config(config, attn_implementation="eager").save_pretrained(folder)
        folders[source.name] = folder
    return folders


def bundled_shapes(folders: dict[str, Path], device: str, repeats: int) -> None:
    for name, folder in folders.items():
        print(f"== {name}", flush=True)
        for dtype in (torch.float32, torch.bfloat16):  # one load per precision: the checks, then (bf16) the bench
            model = load_model(folder, device=device, dtype=dtype)
            text = bench_core.text_of_run_pieces(model, 512)
            checked(f"{name} 512 pieces {dtype}", partial(text_family, model, text))
            checked(f"{name} padded batch {dtype}", partial(text_family, model))
        checked(f"{name} bench bf16", partial(bench, model, repeats))


def bench(model, repeats: int) -> list[str]:
    """bench_core's ratios (it prints them): (a)/(b) at each length up to the model's longest, (c), (d), (f)."""
    bench_core.bench_lengths(model, [n for n in (128, 512, 1024) if n <= model.max_length], repeats)
    bench_core.bench_rebuild(model, repeats)
    bench_core.bench_kernels(model, repeats)
    if model.arch.causal:  # a long text's route (mha_core.analysis.long): up to the model's own position limit
        long = for_long_texts(model)
        print(f"long texts (up to {long.max_length} pieces):")
        lengths = [n for n in (2048, 4096, 8192) if n <= long.max_length]
        bench_core.bench_lengths(long, lengths, repeats)
        if model.device.type == "cuda":
            text = bench_core.text_of_run_pieces(long, lengths[-1])
            peaks = {path: peak_mb(long, text, path) for path in PATHS}
            print(f"peak GPU memory of one forward at {lengths[-1]} pieces: explicit {peaks['explicit']:.0f} MB, "
                  f"fused {peaks['fused']:.0f} MB (weights included)")
    return []


def peak_mb(model, text: str, path: str) -> float:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    result = run(model, text, path=path)
    bench_core.sync(model.device)
    del result
    return torch.cuda.max_memory_allocated() / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", type=Path, help="model folders (config + tokenizer) to run with random weights")
    parser.add_argument("--tokenizer", type=Path, help="the word-piece tokenizer folder of the tiny models")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-families", action="store_true", help="only the bundled models (or --shapes)")
    args = parser.parse_args()
    name = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"torch {torch.__version__}, device {name}")
    tokenizer = (lambda: args.tokenizer) if args.tokenizer else tiny_models.bundled_model_dir
    with tempfile.TemporaryDirectory() as scratch_dir, mock.patch.object(tiny_models, "bundled_model_dir", tokenizer):
        scratch = Path(scratch_dir)
        if not args.skip_families:
            families(args.device, scratch / "tiny")
        bundled_shapes(shaped_folders(args.shapes, scratch / "shapes"), args.device, args.repeats)


if __name__ == "__main__":
    main()
