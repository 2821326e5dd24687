"""analysis/vision/heads.py against naive computations on a tiny ViT (and its rules' edges): [CLS]'s maps, the mean
attention distance in pixels, rollout, the foreground mask and the object heads, the prefix share."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.vision.heads import foreground, image_heads, query_maps
from mha_core.engine.vision.images import run_images
from tests.tiny_models import make_tiny_vision


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory):
    model = load_model(make_tiny_vision("dinov2_with_registers", tmp_path_factory.mktemp("vit") / "v"))
    torch.manual_seed(3)
    return model, run_images(model, torch.randn(1, 3, 40, 40), path="explicit")  # 5 × 5 patches, 5 prefix tokens


def test_every_summary_equals_its_naive_definition(tiny_vit):
    model, result = tiny_vit
    heads = image_heads(result, patch_px=8)
    maps = result.attention()[0].numpy()  # (L,H,N,N)
    prefix, (rows, columns) = 5, result.batch.grid
    assert heads.prefix == ("[CLS]", "[REG 0]", "[REG 1]", "[REG 2]", "[REG 3]") and (rows, columns) == (5, 5)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            for r in range(rows):
                for c in range(columns):  # [CLS]'s weight on patch (r, c)
                    assert heads.cls_maps[layer, head, r, c] == pytest.approx(maps[layer, head, 0,
                                                                                   prefix + r * columns + c])
            total = 0.0  # mean attention distance: every patch query, its weights over the patches renormalised
            for q in range(rows * columns):
                row = maps[layer, head, prefix + q, prefix:]
                row = row / row.sum()
                total += sum(row[k] * 8 * math.dist(divmod(q, columns), divmod(k, columns)) for k in range(len(row)))
            assert heads.distances[layer, head] == pytest.approx(total / (rows * columns), rel=1e-5)
            assert heads.prefix_share[layer, head] == pytest.approx(maps[layer, head, :, :prefix].sum(-1).mean(),
                                                                    rel=1e-5)
    flow = np.eye(maps.shape[-1])  # rollout: 0.5·A + 0.5·I, rows renormalised, layers multiplied in order
    for layer in range(model.n_layers):
        a = 0.5 * maps[layer].mean(0) + 0.5 * np.eye(maps.shape[-1])
        flow = (a / a.sum(-1, keepdims=True)) @ flow
    assert np.allclose(heads.rollout_map.ravel(), flow[0, prefix:], atol=1e-6)
    assert np.allclose(query_maps(result, 7)[1, 2].ravel(), maps[1, 2, 7, prefix:])


def test_the_foreground_holds_its_mass_with_the_fewest_patches():
    weights = np.array([[0.5, 0.05], [0.3, 0.15]])
    assert foreground(weights, 0.6).tolist() == [[True, False], [True, False]]  # 0.5 + 0.3 ≥ 0.6
    assert foreground(weights, 0.5).tolist() == [[True, False], [False, False]]
    assert foreground(np.full((3, 3), 1 / 9), 0.6).sum() == 6  # a flat map: 60% of its patches, no object


def test_object_heads_need_a_real_foreground(tiny_vit):
    from dataclasses import replace

    _, result = tiny_vit
    heads = image_heads(result, patch_px=8)
    share = np.zeros_like(heads.object_share)
    share[1, 2] = 0.9
    small = np.zeros((5, 5), dtype=bool)
    small[:2, :2] = True
    assert replace(heads, object_share=share, mask=small).object_heads == ((1, 2),)
    assert replace(heads, object_share=share, mask=~small).object_heads == ()  # 84% of the image: no object


def test_the_steps_from_pixels_recompute_the_row_the_run_kept(tiny_vit):
    from mha_core.teaching.vision_steps import image_steps

    model, result = tiny_vit
    for query in (0, 3, 17):  # [CLS], a register, a patch
        steps = image_steps(model, result, 1, 2, query)
        assert steps.kept_difference <= 1e-6 and abs(steps.row.sum() - 1) <= 1e-6
        assert [shape for *_, shape in steps.rows()][:3] == ["25 × 192", "25 × 32", "30 × 32"]  # 5 × 5 patches of 8


def test_a_head_that_looks_left_is_positional():
    from mha_core.analysis.vision.heads import fixed_offset

    grid, prefix = (3, 4), 1
    n = prefix + 12
    left = np.full((n, n), 0.01)
    for q in range(12):
        row, column = divmod(q, 4)
        key = q - 1 if column else q  # the patch to the left (the first column: itself)
        left[prefix + q, prefix + key] = 0.8
    assert fixed_offset(left, prefix, grid) == (0, -1)  # 9 of 12 patches look one column left
    assert fixed_offset(np.full((n, n), 1 / n), prefix, grid) is None  # spread: no offset's weight reaches 0.3
