"""`attention --image FILE` on a Vision Transformer: every map of the image's tokens ([CLS], any registers, the
patches row by row), or chosen heads and rows; the image prepared by the model folder's own image processor."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mha_core.cli.common import CliError

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel


def image_attention(model: LoadedModel, args: argparse.Namespace) -> dict:
    """{"model", "tokens", "grid": [rows, columns], "attention": [L][H][N][N]} (or, with --heads, the chosen
    heads' rows as for long texts)."""
    from mha_core.analysis.long.text import chosen_rows
    from mha_core.cli.common import check_every_map, every_map, parse_rows, unique_heads
    from mha_core.engine.tokens import InputError
    from mha_core.engine.vision.images import prepare_images, read_image, run_images

    if args.image is None or any(v is not None for v in (args.text, args.text_file, args.pair, args.target,
                                                         args.audio, args.new)):
        raise CliError(f"{model.name} reads images: give one with --image FILE (no text, --pair, --target, --audio "
                       f"or --new)")
    try:
        pixels = prepare_images(model, [read_image(Path(args.image))], args.size)
        result = run_images(model, pixels, args.path, names=(Path(args.image).name,))
    except (InputError, OSError) as err:
        raise CliError(f"{args.image}: {err}") from None
    grid = list(result.batch.grid)
    if args.heads is None:
        if args.rows is not None:
            raise CliError("--rows takes query rows of the heads chosen with --heads L:H[,L:H...]")
        check_every_map(model, result.lengths[0], "the image", "(and query rows with --rows A:B), or a smaller "
                        "--size")
        return every_map(model, result, grid=grid)

    heads = unique_heads(model, args.heads)
    start, stop = parse_rows(args.rows, result.lengths[0])
    return {"model": model.name, "grid": grid, **chosen_rows(result, heads, range(start, stop))}


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
MAX_IMAGES = 500  # images read from one folder at most


def image_roles(model: LoadedModel, args: argparse.Namespace) -> dict:
    """`roles --images DIR`: every image's object, local and sink heads and each head's mean attention distance
    (analysis.vision), then each head's share of the images on which it is an object head, and its mean distance.
    An image that cannot be read is named on stderr and left out."""
    import numpy as np

    if not model.arch.image:
        raise CliError(f"--images is for Vision Transformers (ViT, DeiT, DINOv2, CLIP); {model.name} reads text")
    files, not_files = image_files(Path(args.images))
    side = args.size  # None: each image prepared as the model folder's image processor prepares it
    if len(files) > MAX_IMAGES:
        print(f"note: {args.images} has {len(files):,} images; the first {MAX_IMAGES:,} (by name) are read",
              file=sys.stderr)
    images, left_out = heads_of_images(model, files[:MAX_IMAGES], side)
    if not images:
        raise CliError(f"{args.images}: no image could be read")
    objects = np.zeros((model.n_layers, model.n_heads))
    for image in images:
        for layer, head in image["object_heads"]:
            objects[layer, head] += 1
    return {"model": model.name, "size": side, "prepared": "as the model's image processor" if side is None else
            "squared to size × size", "images_in_folder": len(files), "read": min(len(files), MAX_IMAGES),
            "beyond_cap": max(len(files) - MAX_IMAGES, 0), "images": images, "left_out": not_files + left_out,
            "object_head_share": objects / len(images),
            "mean_distance": np.mean([image["mean_distance"] for image in images], axis=0)}


def image_files(folder: Path) -> tuple[list[Path], list[str]]:
    """The folder's image files by name, and the names of entries with an image's suffix that are not files
    (a folder named x.png), each named on stderr and left out."""
    try:
        entries = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES) if folder.is_dir() else []
    except OSError as err:
        raise CliError(f"{folder}: cannot be read ({err.strerror})") from None
    files, not_files = [], []
    for entry in entries:
        if entry.is_file():
            files.append(entry)
        else:
            print(f"{entry.name}: not a file, left out", file=sys.stderr)
            not_files.append(entry.name)
    if not files:
        raise CliError(f"{folder}: not a folder of PNG, JPEG or WebP images")
    return files, not_files


def heads_of_images(model: LoadedModel, files: list[Path], side: int | None) -> tuple[list[dict], list[str]]:
    """Each readable image's heads (a progress bar on stderr), and the names of those that could not be read."""
    from mha_core.analysis.vision.heads import image_heads
    from mha_core.cli.common import progress_bar
    from mha_core.engine.tokens import InputError
    from mha_core.engine.vision.images import prepare_images, read_image, run_images

    images, left_out = [], []
    bar, update = progress_bar("image heads")
    for done, path in enumerate(files):
        try:
            result = run_images(model, prepare_images(model, [read_image(path)], side))
        except InputError as err:
            print(f"{path.name}: {err}", file=sys.stderr)
            left_out.append(path.name)
            continue
        heads = image_heads(result, model.arch.patch_size)
        images.append({"file": path.name, "grid": list(heads.grid),
                       "object_heads": [list(h) for h in heads.object_heads],
                       "local_heads": [list(h) for h in heads.local_heads],
                       "sink_heads": [list(h) for h in heads.sink_heads], "mean_distance": heads.distances})
        update(done + 1, len(files))
    bar.close()
    return images, left_out


def add_image_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", help="a Vision Transformer: the image file (PNG, JPEG, WebP)")
    p.add_argument("--size", type=positive_side, default=None,
                   help="square the image to this many pixels a side, departing from the model's own preparation "
                        "(default: prepared exactly as the model folder's image processor prepares it)")


def positive_side(value: str) -> int:
    """--size: a whole number of pixels above 0 (0 is not a way to say 'the default': leave --size out)."""
    try:
        side = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of pixels") from None
    if side <= 0:
        raise argparse.ArgumentTypeError(f"{side} pixels: a side is at least one patch; leave --size out for the "
                                         "model's own preparation")
    return side
