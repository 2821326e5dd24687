"""Images in: a file or a picture prepared as the model folder's own image processor prepares it (else resized and
normalised as ImageNet-trained Vision Transformers are), then every layer and head recomputed (`run_images`).

Shapes: B images, C channels, S_h × S_w pixels (the processor's own: DINOv2's centre crop of 224 × 224; or S × S at a
chosen side), N tokens.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mha_core.engine.arch import DEFAULT_SIDE, MAX_SIDE, Architecture, prefix_names, vision_config
from mha_core.engine.forward import forward
from mha_core.engine.hooks import NO_HOOKS, Hooks
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError, TokenBatch, pad_mask
from mha_core.messages import N_

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
MAX_IMAGE_BYTES = 50 * 2**20  # a larger file is refused before it is decoded
MAX_IMAGE_PIXELS = 50_000_000  # a larger image is refused from its header, before it is decoded (Pillow's own guard
#                                 raises only above twice its MAX_IMAGE_PIXELS: ours is checked here)


def check_side(model: LoadedModel, side: int | None) -> int:
    """The side images are read at: `side` (a multiple of the patch, up to MAX_SIDE), else the model's own."""
    patch = model.arch.patch_size
    side = side or model.arch.image_size or DEFAULT_SIDE
    if not patch <= side <= MAX_SIDE or side % patch:
        raise InputError("image_side_out_of_range", N_("An image is read at {low} to {high} pixels a side, in steps of "
                                                       "the model's patch of {patch}: {side} is not."),
                         low=patch, high=MAX_SIDE, patch=patch, side=side)
    return side


def read_at_most(path: Path, n_bytes: int) -> bytes:
    """A file's first `n_bytes` bytes (/dev/zero never ends: reading it whole fills the memory)."""
    with path.open("rb") as file:
        return file.read(n_bytes)


def read_image(data: bytes | Path) -> object:
    """A file's picture as RGB (Pillow), or one sentence: not an image, truncated, too large, animated."""
    from PIL import Image, UnidentifiedImageError

    data = Path(data) if isinstance(data, str) else data
    try:
        raw = read_at_most(data, MAX_IMAGE_BYTES + 1) if isinstance(data, Path) else data
    except OSError as err:
        raise InputError("image_unreadable_file", N_("{path} cannot be read: {reason}."), path=str(data),
                         reason=err.strerror or type(err).__name__) from None
    if len(raw) > MAX_IMAGE_BYTES:
        raise InputError("image_too_large", N_("The file is over {limit:.0f} MB, the most read of an image."),
                         limit=MAX_IMAGE_BYTES / 2**20)  # a path is read no further: its size is not known
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with warnings.catch_warnings():  # Pillow warns between its limit and twice it: refused below instead
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(raw))  # reads the header only
        with opened as image:
            if image.width * image.height > MAX_IMAGE_PIXELS:
                raise Image.DecompressionBombError
            if getattr(image, "n_frames", 1) > 1:
                raise InputError("image_animated", N_("An animated image has {n} frames; one picture is read: save "
                                                      "the frame you want as PNG or JPEG."), n=image.n_frames)
            image.load()
            return as_rgb(upright(image))
    except InputError:
        raise
    except Image.DecompressionBombError:
        raise InputError("image_bomb", N_("The image has more than {limit:,} pixels: refused before it is decoded."),
                         limit=MAX_IMAGE_PIXELS) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise InputError("not_an_image", N_("The file is not an image Pillow can read (PNG, JPEG, WebP), or it is "
                                            "cut short.")) from None


def as_rgb(image: object) -> object:
    """Any mode as 8-bit RGB: 16-bit and 32-bit greys scaled (not clipped) to 0..255, transparency laid on white,
    CMYK and palettes converted."""
    from PIL import Image

    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):  # 16- or 32-bit grey: its own range to 0..255
        values = np.asarray(image, dtype=np.float64)
        top = 65535.0 if image.mode.startswith("I;16") or values.max() > 255 else 255.0
        image = Image.fromarray(np.clip(values / top * 255.0, 0, 255).astype(np.uint8), "L")
    if "A" in image.getbands() or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    return image.convert("RGB")


def upright(image: object) -> object:
    """The picture as its camera meant it (EXIF orientation applied)."""
    from PIL import ImageOps

    return ImageOps.exif_transpose(image)


def prepare_images(model: LoadedModel, images: Sequence[object], side: int | None = None) -> Tensor:
    """Pictures (Pillow) -> pixel values (B,C,S_h,S_w), exactly as the model folder's own image processor prepares
    them (DINOv2's: shortest edge 256, centre crop 224); with `side`, each picture resized to side × side instead,
    which departs from the model's preparation. A folder with no processor: resized to the model's image size and
    normalised with ImageNet's mean and deviation."""
    return processed(model, images, side, normalise=True)


def seen_pictures(model: LoadedModel, images: Sequence[object], side: int | None = None) -> list[np.ndarray]:
    """What the model saw of each picture: the region `prepare_images` keeps (resized and cropped the same way),
    before rescaling and normalising, as (S_h,S_w,3) uint8 to draw the overlays on."""
    pixels = processed(model, images, side, normalise=False)  # (B,C,S_h,S_w) in 0..255
    return [np.clip(np.rint(p.permute(1, 2, 0).numpy()), 0, 255).astype(np.uint8) for p in pixels]


def processed(model: LoadedModel, images: Sequence[object], side: int | None, normalise: bool) -> Tensor:
    """(B,C,S_h,S_w): the processor's own geometry (or side × side), normalised or in 0..255."""
    check_images(model, images)
    side = check_side(model, side) if side is not None else None
    processor = image_processor(model)
    if processor is not None:
        square = {} if side is None else dict(size={"height": side, "width": side}, do_center_crop=False)
        flags = {} if normalise else dict(do_rescale=False, do_normalize=False)
        pixels = processor(images=list(images), return_tensors="pt", **square, **flags)["pixel_values"]
        return pixels.float()
    side = check_side(model, side)
    arrays = [np.asarray(image.convert("RGB").resize((side, side), resample=3), dtype=np.float32)
              for image in images]  # (S,S,C) each, bicubic
    pixels = torch.tensor(np.stack(arrays)).permute(0, 3, 1, 2)  # (B,C,S,S) in 0..255
    if not normalise:
        return pixels
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (pixels / 255.0 - mean) / std


def check_vision_model(model: LoadedModel) -> None:
    if not model.arch.image:
        raise InputError("images_need_a_vision_model", N_("{model} reads text, not images: choose a Vision "
                                                          "Transformer (ViT, DeiT, DINOv2, CLIP)."), model=model.name)


def check_images(model: LoadedModel, images: Sequence[object]) -> None:
    """A Vision Transformer, and at least one picture, each a Pillow image."""
    from PIL import Image

    check_vision_model(model)
    if not images or not all(isinstance(image, Image.Image) for image in images):
        raise InputError("images_not_pictures", N_("Images are prepared from one or more pictures read with "
                                                   "read_image (Pillow images)."))


def image_processor(model: LoadedModel) -> object | None:
    """The model folder's own image processor (preprocessor_config.json), else None."""
    if not (model.model_dir / "preprocessor_config.json").is_file():
        return None
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(model.model_dir, local_files_only=True)


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


def run_images(model: LoadedModel, pixels: Tensor, path: str = "auto", names: Sequence[str] = (),
               hooks: Hooks = NO_HOOKS) -> AttentionResult:
    """Every layer and head of a Vision Transformer on prepared images (B,C,S,S): the result's "pieces" are the
    prefix tokens ([CLS], [DIST], registers) then the patches row by row; result.batch.grid is (rows, columns)."""
    check_vision_model(model)
    batch = image_batch(pixels, model.arch, prefix_names(vision_config(model.config)), tuple(names))
    return forward(model, batch, path, hooks=hooks)
