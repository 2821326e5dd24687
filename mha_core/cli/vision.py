"""`attention --image FILE` on a Vision Transformer: every map of the image's tokens ([CLS], any registers, the
patches row by row), or chosen heads and rows; the image prepared by the model folder's own image processor."""

from __future__ import annotations

import argparse
from pathlib import Path

from mha_core.cli.common import CliError
from mha_core.engine.model import LoadedModel


def image_attention(model: LoadedModel, args: argparse.Namespace) -> dict:
    """{"model", "tokens", "grid": [rows, columns], "attention": [L][H][N][N]} (or, with --heads, the chosen
    heads' rows as for long texts)."""
    from mha_core.analysis.long_text import chosen_rows
    from mha_core.cli.attention import every_map, parse_rows
    from mha_core.engine.images import prepare_images, read_image, run_images
    from mha_core.engine.tokens import InputError

    if args.image is None or any(v is not None for v in (args.text, args.text_file, args.pair, args.target,
                                                         args.audio)):
        raise CliError(f"{model.name} reads images: give one with --image FILE (no text, --pair, --target or --audio)")
    try:
        pixels = prepare_images(model, [read_image(Path(args.image))], args.size)
        result = run_images(model, pixels, args.path, names=(Path(args.image).name,))
    except (InputError, OSError) as err:
        raise CliError(f"{args.image}: {err}") from None
    grid = list(result.batch.grid)
    if args.heads is None:
        if args.rows is not None:
            raise CliError("--rows takes query rows of the heads chosen with --heads L:H[,L:H...]")
        return every_map(model, result, grid=grid)
    from mha_core.analysis.patching import check_head

    heads = list(dict.fromkeys(check_head(model, head) for head in args.heads))
    start, stop = parse_rows(args.rows, result.lengths[0])
    return {"model": model.name, "grid": grid, **chosen_rows(result, heads, range(start, stop))}


def add_image_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", help="a Vision Transformer: the image file (PNG, JPEG, WebP)")
    p.add_argument("--size", type=int, default=None, help="pixels a side the image is read at (default: the model's)")
