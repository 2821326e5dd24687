"""Issue 77.4: the lesson's cost step counts Gemma 3 270M's KV cache from its own shape: 18 layers × 1 key/value
head × (256 + 256) × 2 bytes = 18,432 B per piece (the step said 14,976, d_v taken as 640 / 4 = 160), 73,728 with
four heads (it said 59,904), and names the model's own layout."""

from __future__ import annotations

import pytest

from mha_core.engine.loading.bundled import GEMMA_NAME
from mha_core.teaching.lesson import STEPS
from tests.conftest import chart_json, decode, open_app

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cost_step_counts_gemma_s_kv_cache_from_its_config(lang, gemma):
    config = gemma.model.config
    step = next(i for i, s in enumerate(STEPS, start=1) if s.key == "cost")
    at = open_app("views/lesson.py", lang=lang, model=GEMMA_NAME, step=str(step))
    assert not at.exception and not at.error
    lines = chart_json(at, "kv_cache")["data"]
    per_piece = {line["name"]: decode(line["y"])[-1] / decode(line["x"])[-1] for line in lines}
    per_head = config.num_hidden_layers * (config.head_dim + config.head_dim) * 2
    assert per_head == 18_432
    own = [name for name in per_piece if GEMMA_NAME in name]
    assert len(own) == 1 and per_piece[own[0]] == per_head * config.num_key_value_heads
    assert max(per_piece.values()) == per_head * config.num_attention_heads == 73_728
