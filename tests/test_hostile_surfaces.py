"""Issue 43: one sentence for every bad file and call on the newer surfaces — images past the pixel cap refused from
their header, audio that is not sound levels or not speech's rate, what the CLI cut or left out said aloud (a long
target, a folder's 500 images, a pair past the window), and the CLI's tracebacks gone (a folder named like an image,
unreadable text files for an index, options a model does not take)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from mha_core.engine.tokens import InputError
from tests.conftest import cli


def one_line(run: object) -> bool:
    return run.returncode == 2 and run.stderr.startswith("error: ") and len(run.stderr.strip().splitlines()) == 1


def test_an_image_past_the_pixel_cap_is_refused_from_its_header(tmp_path, monkeypatch):
    """50,410,000 pixels: over the stated 50 M (Pillow alone raised only past 100 M and decoded it)."""
    from PIL import Image, ImageFile

    from mha_core.engine.vision.images import MAX_IMAGE_PIXELS, read_image

    path = tmp_path / "wide.png"
    Image.new("1", (7100, 7100)).save(path)  # a small file of 1-bit pixels
    assert MAX_IMAGE_PIXELS < 7100 * 7100
    decoded = []
    real_load = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda image: decoded.append(image.size) or real_load(image))
    with pytest.raises(InputError, match="more than 50,000,000 pixels: refused before it is decoded"):
        read_image(path)
    assert decoded == []  # refused from the header: nothing decoded
    at_cap = tmp_path / "at-cap.png"
    Image.new("1", (7000, 7000)).save(at_cap)  # 49 M: read
    assert read_image(str(at_cap)).size == (7000, 7000)  # a str path is taken where a Path is


def wav(samples: np.ndarray, rate: int, subtype: str = "FLOAT") -> bytes:
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, samples, rate, subtype=subtype, format="WAV")
    return out.getvalue()


def test_audio_that_is_not_sound_levels_or_speech_rate_is_refused():
    from mha_core.engine.seq2seq.audio import read_audio

    tone = np.sin(np.linspace(0, 2000, 16_000)).astype(np.float32)
    assert read_audio(wav(tone, 16_000)).seconds == pytest.approx(1.0)
    with pytest.raises(InputError, match="samples reach 1e\\+30, where audio lies within -1 to 1"):
        read_audio(wav(tone * 1e30, 16_000))
    with pytest.raises(InputError, match="1 samples a second; speech needs at least 1,000"):
        read_audio(wav(tone[:30], 1, "PCM_16"))  # heard as 30 s before
    with pytest.raises(InputError, match="nowhere.wav cannot be read"):
        read_audio("/nowhere.wav")


def test_a_long_target_is_cut_and_said_so(tmp_path):
    from tests.tiny_models import make_tiny_seq2seq

    folder = make_tiny_seq2seq("bart", tmp_path / "bart")
    out = tmp_path / "out.json"
    run = cli("attention", "The cat sat.", "--target", " ".join(["word"] * 5000), "--model-dir", str(folder),
              "--json", str(out))
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert data["target_truncated"] is True and data["target_pieces"] > len(data["target_tokens"])
    assert f"the target has {data['target_pieces']:,} pieces; the decoder reads its first" in run.stderr
    short = cli("attention", "The cat sat.", "--target", "A cat.", "--model-dir", str(folder), "--json", str(out))
    assert short.returncode == 0 and json.loads(out.read_text())["target_truncated"] is False


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_long_target_is_said_on_the_page(tmp_path, monkeypatch, lang):
    from mha_core.i18n import catalogue
    from tests.conftest import open_app
    from tests.tiny_models import make_tiny_seq2seq

    make_tiny_seq2seq("bart", tmp_path / "bart")
    monkeypatch.setenv("MHA_MODELS_DIR", str(tmp_path))
    warning = catalogue(lang).gettext("The target was cut to the decoder's {kept} pieces: {n:,} of {n2:,} pieces at "
                                      "the end are not read.").split("{")[0]
    at = open_app("views/seq2seq.py", model="bart", target=" ".join(["word"] * 600), lang=lang)
    assert not at.exception and any(warning in w.value for w in at.warning), [w.value for w in at.warning]
    short = open_app("views/seq2seq.py", model="bart", target="A cat.", lang=lang)
    assert not short.exception and not any(warning in w.value for w in short.warning)


@pytest.fixture(scope="module")
def vision_dir(tmp_path_factory):
    from tests.tiny_models import make_tiny_vision

    return make_tiny_vision("vit", tmp_path_factory.mktemp("vit") / "vit")


def test_a_folder_of_images_says_what_it_read_and_skips_what_is_not_a_file(vision_dir, tmp_path, monkeypatch):
    from PIL import Image

    from mha_core.cli import vision

    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(5):
        Image.new("RGB", (40, 40), (50 * i, 20, 200)).save(folder / f"{i}.png")
    (folder / "x.png").mkdir()  # a folder named like an image: it aborted the run (IsADirectoryError)
    monkeypatch.setattr(vision, "MAX_IMAGES", 3)
    out = tmp_path / "roles.json"
    run = cli("roles", "--images", str(folder), "--model-dir", str(vision_dir), "--json", str(out))
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert (data["images_in_folder"], data["read"], data["beyond_cap"], len(data["images"])) == (5, 3, 2, 3)
    assert data["left_out"] == ["x.png"]
    assert "x.png: not a file, left out" in run.stderr and "has 5 images; the first 3 (by name) are read" in run.stderr


def test_every_map_of_an_image_is_capped_as_a_text_is(vision_dir, tmp_path):
    from PIL import Image

    Image.new("RGB", (300, 300), (10, 200, 30)).save(tmp_path / "green.png")
    big = cli("attention", "--image", str(tmp_path / "green.png"), "--size", "264", "--model-dir", str(vision_dir),
              "--json", str(tmp_path / "out.json"))  # 33 × 33 patches + [CLS] = 1,090 tokens
    assert one_line(big) and "the image has 1,090 pieces: every map would be" in big.stderr
    assert not (tmp_path / "out.json").exists() or (tmp_path / "out.json").stat().st_size == 0
    chosen = cli("attention", "--image", str(tmp_path / "green.png"), "--size", "264", "--heads", "0:0", "--rows",
                 "0:2", "--model-dir", str(vision_dir), "--json", str(tmp_path / "rows.json"))
    assert chosen.returncode == 0, chosen.stderr


@pytest.mark.parametrize("content", [b"\x00\x01\x02\xff" * 100, b"", b"   \n \n", "A cat.\n".encode("utf-16")])
def test_an_unreadable_text_file_for_an_index_is_one_line(tiny_dir, tmp_path, content):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    run = cli("index", "--text-file", str(path), "--model-dir", str(tiny_dir), "--out", str(tmp_path / "index"))
    assert one_line(run), run.stderr


def test_options_a_model_does_not_take_are_one_line(tiny_dir, vision_dir, tmp_path):
    from tests.tiny_models import make_tiny_seq2seq

    whisper = make_tiny_seq2seq("whisper", tmp_path / "whisper")
    (tmp_path / "a.wav").write_bytes(wav(np.sin(np.linspace(0, 900, 16_000)).astype(np.float32), 16_000))
    new = cli("attention", "The cat sat.", "--new", "5", "--model-dir", str(tiny_dir))
    assert one_line(new) and "--new are for encoder–decoders" in new.stderr and "is an encoder" in new.stderr
    both = cli("attention", "--audio", str(tmp_path / "a.wav"), "--image", str(tmp_path / "a.wav"), "--model-dir",
               str(whisper))
    assert one_line(both) and "hears audio" in both.stderr and "reads text" not in both.stderr
    zero = cli("attention", "--image", str(tmp_path / "a.wav"), "--size", "0", "--model-dir", str(vision_dir))
    assert zero.returncode == 2 and "leave --size out" in zero.stderr


def test_a_pair_past_the_window_says_it_was_cut(tiny_dir, tmp_path):
    long = " ".join(["cat"] * 400)
    run = cli("attention", "--pair", long, long, "--model-dir", str(tiny_dir), "--json", str(tmp_path / "pair.json"))
    assert run.returncode == 0, run.stderr
    data = json.loads((tmp_path / "pair.json").read_text())
    assert data["truncated"] is True and len(data["tokens"]) < data["n_tokens"]
    assert f"the input has {data['n_tokens']:,} pieces" in run.stderr
