"""tests/tolerance.py's bound is relative to the reference's largest value, over the entries a mask keeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.tolerance import assert_close_to_scale, scaled_error


@pytest.mark.parametrize("scale", [1e-3, 1.0, 170.0, 1e5])
def test_the_same_relative_error_passes_or_fails_at_any_scale(scale):
    ref = torch.linspace(-1, 1, 64, dtype=torch.float64).reshape(4, 16) * scale
    slightly_off = ref.clone()
    slightly_off[2, 3] += 1e-6 * scale
    assert scaled_error(slightly_off, ref) == pytest.approx(1e-6, rel=1e-3)
    assert assert_close_to_scale(slightly_off, ref, 2e-6) == pytest.approx(1e-6, rel=1e-3)
    with pytest.raises(AssertionError, match=r"max abs error / max abs of the reference = 1e-06 > 5e-07"):
        assert_close_to_scale(slightly_off, ref, 5e-7, what="case")


def test_a_mask_leaves_padding_out_and_arrays_are_taken():
    ref = np.ones((2, 3, 4), np.float32)
    ours = ref.copy()
    ours[1, 2] = 5  # a padded row: any value
    real = torch.tensor([[True] * 3, [True, True, False]])[..., None]  # (B,T,1)
    assert assert_close_to_scale(ours, ref, 1e-9, real) == 0.0
    with pytest.raises(AssertionError):
        assert_close_to_scale(ours, ref, 1e-9)
