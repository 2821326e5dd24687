"""Vision Transformers (issue 36): every family's tiny random model equals transformers' eager forward, every map and
hidden state, on both paths, for a batch of images at the trained size and at another (interpolated positions);
the tokens are the prefix ([CLS], [DIST], registers) then the patches row by row."""

from __future__ import annotations

import pytest
import torch

from mha_core import load_model
from mha_core.engine.vision.images import run_images
from mha_core.engine.vision.weights import vision_module
from tests.tiny_models import VISION_CONFIGS, make_tiny_vision
from tests.tolerance import assert_close_to_scale

PREFIX = {"deit": 2, "dinov2_with_registers": 5}  # [CLS] [DIST]; [CLS] and 4 registers; else [CLS]


@pytest.fixture(scope="module", params=list(VISION_CONFIGS))
def vision(request, tmp_path_factory):
    family = request.param
    return family, load_model(make_tiny_vision(family, tmp_path_factory.mktemp("vision") / family))


def reference(model, pixels):
    """transformers' eager forward; positions interpolated to another size (DINOv2 always does)."""
    resize = {} if model.arch.layer_scale else {"interpolate_pos_encoding": True}
    with torch.inference_mode():
        return vision_module(model.model)(pixel_values=pixels, output_attentions=True, output_hidden_states=True,
                                          **resize)


@pytest.mark.parametrize("side", [32, 48])
@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_every_map_and_hidden_state_equals_transformers(vision, side, path):
    family, model = vision
    torch.manual_seed(1)
    pixels = torch.randn(2, 3, side, side)
    result = run_images(model, pixels, path=path)
    ref = reference(model, pixels)
    n = PREFIX.get(family, 1) + (side // 8) ** 2
    assert result.batch.grid == (side // 8, side // 8) and result.lengths == (n, n)
    last = side // 8 - 1
    assert result.tokens[0][PREFIX.get(family, 1)] == "patch 0,0" and result.tokens[0][-1] == f"patch {last},{last}"
    maps = result.attention()  # (B,L,H,N,N), rebuilt from the log-sum-exp on the fused path
    assert_close_to_scale(maps, torch.stack(ref.attentions, dim=1), 1e-5, what=family)
    assert len(result.hidden_states) == len(ref.hidden_states) == model.n_layers + 1
    for ours, theirs in zip(result.hidden_states[:-1], ref.hidden_states[:-1], strict=True):  # the embeddings, layers
        assert_close_to_scale(ours, theirs, 1e-5, what=family)
    assert_close_to_scale(result.last_hidden_state, ref.last_hidden_state, 1e-5, what=family)  # after the final norm


def test_the_description_names_what_differs(vision):
    family, model = vision
    arch = model.arch
    assert arch.image and not arch.causal and arch.patch_size == 8 and arch.n_prefix == PREFIX.get(family, 1)
    assert arch.layer_scale == family.startswith("dinov2")
    assert model.tokenizer is None and model.n_layers == 2 and model.n_heads == 4


def picture(path, mode: str = "RGB", size: tuple[int, int] = (40, 30), **save: object) -> object:
    """A small picture file: a red square on a blue field (to see where patches come from)."""
    from PIL import Image

    image = Image.new("RGB", size, (20, 40, 200))
    image.paste((220, 20, 20), (4, 4, 20, 20))
    image.convert(mode).save(path, **save)
    return path


def test_cli_attention_of_an_image_writes_every_map(vision, tmp_path):
    import json

    from mha_core.engine.vision.images import prepare_images, read_image
    from tests.conftest import cli

    family, model = vision
    out = tmp_path / "a.json"
    run = cli("attention", "--model-dir", str(model.model_dir), "--image", str(picture(tmp_path / "p.png")),
              "--size", "48", "--json", str(out))
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    n = PREFIX.get(family, 1) + 36
    assert data["grid"] == [6, 6] and len(data["tokens"]) == n and data["tokens"][0] == "[CLS]"
    maps = torch.tensor(data["attention"])  # (L,H,N,N)
    assert maps.shape == (2, 4, n, n) and torch.allclose(maps.sum(-1), torch.ones(2, 4, n), atol=1e-4)
    pixels = prepare_images(model, [read_image(tmp_path / "p.png")], 48)  # as the model folder's processor makes it
    theirs = torch.cat(reference(model, pixels).attentions)  # (L,H,N,N) transformers' eager forward
    assert (maps - theirs).abs().max() <= 1e-5
    chosen = cli("attention", "--model-dir", str(model.model_dir), "--image", str(tmp_path / "p.png"), "--heads",
                 "1:2", "--rows", "0:1", "--json", str(tmp_path / "b.json"))
    assert chosen.returncode == 0, chosen.stderr
    row = json.loads((tmp_path / "b.json").read_text())
    assert row["grid"] == [4, 4] and row["heads"] == [[1, 2]] and row["rows"] == [0, 1]
    assert len(row["attention"][0][0]) == PREFIX.get(family, 1) + 16  # [CLS]'s row over every token
    theirs = reference(model, prepare_images(model, [read_image(tmp_path / "p.png")], None)).attentions[1][0, 2, :1]
    assert (torch.tensor(row["attention"][0]) - theirs).abs().max() <= 1e-5  # layer 1, head 2, row 0


def test_image_files_are_read_upright_in_rgb_and_bad_ones_get_one_sentence(tmp_path):
    import numpy as np
    from PIL import Image

    from mha_core.engine.tokens import InputError
    from mha_core.engine.vision.images import MAX_IMAGE_BYTES, read_image

    assert read_image(picture(tmp_path / "a.jpg", "CMYK")).mode == "RGB"  # CMYK
    deep = Image.fromarray(np.full((8, 8), 60000, dtype=np.uint16))  # 16-bit grey: scaled, not clipped to white
    deep.save(tmp_path / "deep.png")
    assert read_image(tmp_path / "deep.png").getpixel((0, 0)) == (233, 233, 233)
    clear = Image.new("RGBA", (8, 8), (0, 0, 0, 0))  # transparent: on white, not black
    clear.save(tmp_path / "clear.png")
    assert read_image(tmp_path / "clear.png").getpixel((0, 0)) == (255, 255, 255)
    tall = Image.new("RGB", (40, 20))  # stored landscape, EXIF says: rotate 90° (orientation 6)
    exif = tall.getexif()
    exif[0x0112] = 6
    tall.save(tmp_path / "rotated.jpg", exif=exif)
    assert read_image(tmp_path / "rotated.jpg").size == (20, 40)
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 255, 0))]
    frames[0].save(tmp_path / "moving.gif", save_all=True, append_images=frames[1:])
    bomb = tmp_path / "bomb.png"  # a PNG header of 100,000 × 100,000 pixels: refused before decoding
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    bomb.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    (tmp_path / "cut.png").write_bytes((tmp_path / "clear.png").read_bytes()[:40])
    (tmp_path / "text.png").write_text("not an image")
    said = {}
    for name in ("moving.gif", "bomb.png", "cut.png", "text.png"):
        with pytest.raises(InputError) as err:
            read_image(tmp_path / name)
        said[name] = str(err.value)
    with pytest.raises(InputError, match="MB"):
        read_image(b"\0" * (MAX_IMAGE_BYTES + 1))
    assert "2 frames" in said["moving.gif"] and "pixels" in said["bomb.png"]
    assert "not an image" in said["cut.png"] and "not an image" in said["text.png"]


def test_cli_roles_over_a_folder_of_images_names_the_unreadable(tmp_path):
    import json

    from tests.conftest import cli

    model_dir = make_tiny_vision("vit", tmp_path / "vit")
    images = tmp_path / "images"
    images.mkdir()
    picture(images / "a.png")
    picture(images / "b.jpg", size=(50, 50))
    (images / "c.png").write_text("not an image")
    out = tmp_path / "roles.json"
    run = cli("roles", "--images", str(images), "--model-dir", str(model_dir), "--size", "32", "--json", str(out))
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert [i["file"] for i in data["images"]] == ["a.png", "b.jpg"] and data["left_out"] == ["c.png"]
    assert "c.png: The file is not an image" in run.stderr
    assert len(data["mean_distance"]) == 2 and len(data["object_head_share"][0]) == 4
    text = cli("roles", "--images", str(images), "--json", str(out))  # the bundled encoder reads text
    assert text.returncode == 2 and "reads text" in text.stderr


def with_processor(tmp_path, processor_class: str, **settings: object):
    """A tiny DINOv2 whose folder holds its own image processor (as a real DINOv2 does)."""
    import transformers

    folder = make_tiny_vision("dinov2", tmp_path / "dinov2")
    getattr(transformers, processor_class)(**settings).save_pretrained(folder)
    return load_model(folder)


DINOV2_PROCESSOR = dict(size={"shortest_edge": 40}, crop_size={"height": 32, "width": 32}, do_center_crop=True)


@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_by_default_an_image_is_prepared_exactly_as_the_folder_s_processor_prepares_it(tmp_path, path):
    """Issue 42, item 2: before, the photo was squashed to a square (7.7e-3 from transformers on a tiny DINOv2)."""
    from PIL import Image

    from mha_core.engine.vision.images import prepare_images, read_image

    model = with_processor(tmp_path, "BitImageProcessor", **DINOV2_PROCESSOR)
    photo = read_image(picture(tmp_path / "p.png", size=(64, 48)))
    processor = transformers_processor(model.model_dir)
    theirs = processor(images=[Image.open(tmp_path / "p.png").convert("RGB")], return_tensors="pt")["pixel_values"]
    ours = prepare_images(model, [photo])
    assert ours.shape == theirs.shape == (1, 3, 32, 32)
    assert_close_to_scale(ours, theirs, 1e-6)
    result, ref = run_images(model, ours, path), reference(model, theirs)
    assert_close_to_scale(result.attention()[0], torch.stack(ref.attentions, 1)[0], 1e-5)
    assert_close_to_scale(result.last_hidden_state, ref.last_hidden_state, 1e-5)


def transformers_processor(folder):
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(folder, local_files_only=True)


def test_the_overlays_are_drawn_on_the_region_the_model_saw(tmp_path):
    """The seen picture is the processor's resize and centre crop: a 64 × 48 picture, shortest edge to 40 (53 × 40),
    centre crop 32 × 32, compared with Pillow doing those two steps by hand."""
    import numpy as np
    from PIL import Image

    from mha_core.engine.vision.images import read_image, seen_pictures

    model = with_processor(tmp_path, "BitImageProcessor", **DINOV2_PROCESSOR)
    photo = read_image(picture(tmp_path / "p.png", size=(64, 48)))
    seen = seen_pictures(model, [photo])[0]
    by_hand = np.asarray(photo.resize((53, 40), Image.BICUBIC), dtype=np.float64)[4:36, 10:42]
    assert seen.shape == (32, 32, 3) and seen.dtype == np.uint8
    assert np.abs(seen - by_hand).mean() < 2.0  # rounding of the resample only
    squared = seen_pictures(model, [photo], side=48)[0]  # a chosen side: squared, the whole picture
    assert squared.shape == (48, 48, 3)


def test_a_processor_that_keeps_the_aspect_gives_a_rectangular_grid_and_figures(tmp_path):
    import numpy as np

    from mha_core.engine.vision.images import prepare_images, read_image, seen_pictures
    from mha_core.figures.vision import head_overlay_figure, overlay

    model = with_processor(tmp_path, "BitImageProcessor", size={"shortest_edge": 32}, do_center_crop=False)
    photo = read_image(picture(tmp_path / "p.png", size=(64, 32)))
    result = run_images(model, prepare_images(model, [photo]))
    seen = seen_pictures(model, [photo])[0]
    assert result.batch.grid == (4, 8) and seen.shape == (32, 64, 3)
    patch_map = np.random.default_rng(0).random((4, 8))
    assert overlay(seen, patch_map).shape == (32, 64, 3)
    layout = head_overlay_figure(seen, patch_map, "t", query=(1, 7))["layout"]
    assert layout["xaxis"]["range"] == [0, 64] and layout["yaxis"]["range"] == [32, 0]
    assert layout["shapes"][0]["x1"] == 64 and layout["shapes"][0]["y1"] == 16


def test_the_page_opens_on_the_model_s_own_preparation(tmp_path):
    from mha_core.engine.vision.images import prepare_images, read_image
    from mha_core.serving.computed import vision as computed_vision
    from mha_core.serving.server import Server

    model = with_processor(tmp_path, "BitImageProcessor", **DINOV2_PROCESSOR)
    data = picture(tmp_path / "p.png", size=(64, 48)).read_bytes()
    assert computed_vision.sides(model)[0] == computed_vision.OWN
    result, seen = computed_vision.result_of(Server(), model, data, computed_vision.OWN)
    expected = prepare_images(model, [read_image(data)])
    assert torch.equal(result.batch.features, expected) and seen.shape == (32, 32, 3)


def test_a_side_of_zero_or_less_is_refused_not_taken_for_the_default(vision, tmp_path):
    from tests.conftest import cli

    _, model = vision
    for side in ("0", "-14", "x"):
        run = cli("attention", "--model-dir", str(model.model_dir), "--image", str(picture(tmp_path / "p.png")),
                  "--size", side, "--json", str(tmp_path / "a.json"))
        assert run.returncode == 2 and "--size" in run.stderr and "Traceback" not in run.stderr, side
