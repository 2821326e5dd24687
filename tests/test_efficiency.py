"""Issue 48: sparse and linear attention patterns through the one layer loop, and the measured cost of attention.
References are independent of the code under test: transformers' own models given the pattern as an additive 4D
mask, masks and kernels written here as plain loops, the softmax a kernel approximates."""

from __future__ import annotations

import json

import pytest
import torch

from mha_core import InputError, load_model, parse_pattern, with_pattern
from mha_core.analysis.efficiency.cost import KERNEL_OF, attention_cost, check_cost_inputs
from mha_core.analysis.efficiency.patterns import allowed_keys, kernel_map
from mha_core.engine.budget import BudgetError
from tests.conftest import cli
from tests.tiny_models import make_tiny, make_tiny_vision

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    return {family: make_tiny(family, tmp_path_factory.mktemp(family)) for family in ("bert", "llama")}


def naive_allowed(kind, n, causal, w=0, d=1, g=0):
    """The masks as the papers describe them, one pair at a time."""
    seen = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(n):
            near = abs(i - j) <= w * d and (i - j) % d == 0 if kind == "dilated" else abs(i - j) <= w
            seen[i, j] = (kind == "dense" or near or i < g or j < g) and (not causal or j <= i)
    return seen


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("spec,kind,numbers", [("dense", "dense", {}), ("window:2", "window", {"w": 2}),
                                               ("dilated:2:3", "dilated", {"w": 2, "d": 3}),
                                               ("longformer:1:2", "longformer", {"w": 1, "g": 2})])
def test_masks_equal_the_papers_rules_pair_by_pair(spec, kind, numbers, causal):
    assert torch.equal(allowed_keys(parse_pattern(spec), 11, causal), naive_allowed(kind, 11, causal, **numbers))


def test_bigbird_adds_r_seeded_random_keys_to_longformer_s():
    big = allowed_keys(parse_pattern("bigbird:1:1:3:7"), 20, False)
    base = naive_allowed("longformer", 20, False, 1, 1, 1)
    assert torch.equal(big & base, base)  # the window and the globals are kept
    assert torch.equal(big, allowed_keys(parse_pattern("bigbird:1:1:3:7"), 20, False))  # seeded
    assert not torch.equal(big, allowed_keys(parse_pattern("bigbird:1:1:3:8"), 20, False))
    extra = (big & ~base).sum(-1)
    assert int(extra.max()) <= 3 and float(extra[1:].float().mean()) >= 1.5  # up to R draws fall outside the window


@pytest.mark.parametrize("spec", ["windw:3", "window:0", "window:x", "window", "bigbird:1:1:1:s", "linear:relu",
                                  "performer:9999:0", "dilated:2"])
def test_a_pattern_that_does_not_parse_is_one_sentence(spec):
    with pytest.raises(InputError) as err:
        parse_pattern(spec)
    assert err.value.code == "pattern_unreadable" and spec in str(err.value)


def additive(allowed):
    return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)[None, None]


@pytest.mark.parametrize("path", ["explicit", "fused"])
@pytest.mark.parametrize("family,spec", [("bert", "window:2"), ("bert", "bigbird:1:1:2:3"), ("llama", "window:3"),
                                         ("llama", "longformer:2:1")])
def test_a_masked_pattern_equals_transformers_given_it_as_an_additive_mask(tiny_models, family, spec, path):
    from transformers import AutoModel

    model = load_model(tiny_models[family])
    run = with_pattern(model, TEXT, spec, path=path)
    allowed = torch.as_tensor(run.allowed)
    reference = AutoModel.from_pretrained(tiny_models[family], attn_implementation="eager", local_files_only=True)
    ids = run.dense.batch.input_ids
    with torch.inference_mode():
        out = reference(input_ids=ids, attention_mask=additive(allowed), output_attentions=True)
    assert torch.allclose(torch.as_tensor(run.last_hidden), out.last_hidden_state[0], atol=1e-4)
    with torch.inference_mode():  # kept mass: transformers' own dense weights summed over the pattern's keys
        dense = reference(input_ids=ids, output_attentions=True).attentions
    expected = torch.stack([(a[0] * allowed).sum(-1).mean(-1) for a in dense])  # (L,H)
    assert torch.allclose(torch.as_tensor(run.kept_mass), expected, atol=1e-5)


def test_a_pattern_on_chosen_layers_leaves_the_layers_before_them_unchanged(tiny_models):
    run = with_pattern(load_model(tiny_models["llama"]), TEXT, "window:1", layers=[1])
    assert run.layer_change[0] == 0 and run.layer_change[1] > 0.01
    assert run.next_kl is None or run.next_kl >= 0  # a bare decoder stack here: no language-model head


def reference_kernel(q, k, phi, causal):
    """Row i: φ(q_i)·φ(k_j) over the keys it sees, normalised; plain loops."""
    n = q.shape[0]
    out = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(n if not causal else i + 1):
            out[i, j] = phi(q[i]) @ phi(k[j])
        out[i] /= out[i].sum()
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_linear_and_performer_maps_equal_their_formulas_written_out(causal):
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 7, 8, generator=generator, dtype=torch.float64)
    scale = 8 ** -0.5
    elu = lambda x: torch.nn.functional.elu(x * scale ** 0.5) + 1  # noqa: E731
    got = kernel_map(parse_pattern("linear:elu"), q[None, None], k[None, None], scale, causal)[0, 0]
    assert torch.allclose(got, reference_kernel(q, k, elu, causal), atol=1e-5)
    draws = torch.randn(64, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    positive = lambda x: torch.exp(draws @ (x * scale ** 0.5) - (x * x).sum() * scale / 2)  # noqa: E731
    got = kernel_map(parse_pattern("performer:64:5"), q[None, None], k[None, None], scale, causal)[0, 0]
    assert torch.allclose(got, reference_kernel(q, k, positive, causal), atol=1e-5)


def test_performer_s_error_against_the_softmax_falls_as_m_grows():
    generator = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 1, 4, 24, 16, generator=generator, dtype=torch.float64)
    softmax = torch.softmax(q @ k.transpose(-1, -2) * 16 ** -0.5, dim=-1)

    def error(m):
        return sum(float((kernel_map(parse_pattern(f"performer:{m}:{seed}"), q, k, 16 ** -0.5, False) - softmax)
                         .abs().sum(-1).mean()) for seed in range(4)) / 4

    errors = [error(m) for m in (8, 64, 512, 4096)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0] / 2  # seeded: 1.01, 0.68, 0.54, 0.33


def test_a_pattern_is_refused_on_an_image_model_and_beyond_the_text(tmp_path, tiny_models):
    with pytest.raises(InputError) as err:
        with_pattern(load_model(make_tiny_vision("vit", tmp_path / "vit")), TEXT, "window:2")
    assert err.value.code == "pattern_needs_text_model"
    with pytest.raises(InputError) as err:
        with_pattern(load_model(tiny_models["bert"]), "A short one.", "window:40")
    assert err.value.code == "pattern_wider_than_text" and "40" in str(err.value)
    with pytest.raises(InputError, match="Layer 9 does not exist"):
        with_pattern(load_model(tiny_models["bert"]), TEXT, "window:2", layers=[9])


def test_the_cost_kernels_compute_attention_and_the_window_its_band():
    q, k, v = torch.randn(3, 2, 50, 8, generator=torch.Generator().manual_seed(2))
    scores = q @ k.transpose(1, 2) * 8 ** -0.5
    dense = torch.softmax(scores, -1) @ v
    band = torch.softmax(scores + additive(naive_allowed("window", 50, False, 6))[0], -1) @ v
    assert torch.allclose(KERNEL_OF["explicit"](q, k, v, 6), dense, atol=1e-5)
    assert torch.allclose(KERNEL_OF["fused"](q, k, v, 6), dense, atol=1e-5)
    assert torch.allclose(KERNEL_OF["window"](q, k, v, 6), band, atol=1e-5)
    elu_q, elu_k = torch.nn.functional.elu(q) + 1, torch.nn.functional.elu(k) + 1
    weights = elu_q @ elu_k.transpose(1, 2)
    assert torch.allclose(KERNEL_OF["linear"](q, k, v, 6), weights / weights.sum(-1, keepdim=True) @ v, atol=1e-5)


def test_the_cost_is_measured_per_kernel_and_lengths_over_the_budget_are_refused(monkeypatch):
    cost = attention_cost([128, 512], heads=2, head_dim=16, kernels=("explicit", "linear"), window=32, memory=False,
                          repeats=1)
    assert set(cost.seconds) == {"explicit", "linear"} and all(t > 0 for t in cost.seconds["explicit"])
    assert cost.flops["explicit"][1] == 16 * cost.flops["explicit"][0]  # analytic: n² grows 16x
    assert cost.flops["linear"][1] == 4 * cost.flops["linear"][0]
    monkeypatch.setenv("MHA_COMPUTE_MB", "64")
    with pytest.raises(BudgetError, match="the longest that fits is 2,872 pieces"):  # 8·n² + 3·2·16·n·4 bytes
        check_cost_inputs([512, 8192], ["explicit"], 2, 16, 32)


def test_every_kernel_s_peak_comes_from_a_fork_of_one_process(monkeypatch):
    """One process imports torch for all the kernels (a process per kernel spent about 1.5 s each importing it),
    and each kernel runs in a fork of it: explicit's peak holds at least one head's (T,T) weights, linear's far
    less. The forks get torch's threads back (a fork using a pool its parent started would hang)."""
    import subprocess

    from mha_core.analysis.efficiency import cost

    started: list[list[str]] = []
    real_popen = subprocess.Popen
    monkeypatch.setattr(cost.subprocess, "Popen", lambda args, **kw: started.append(args) or real_popen(args, **kw))
    measured: list[str] = []
    peaks = cost.peak_megabytes(("explicit", "linear"), [1024, 512], heads=4, head_dim=16, window=32,
                                measured=measured.append)
    assert len(started) == 1 and set(peaks) == {"explicit", "linear"} and measured == ["explicit", "linear"]
    one_head_mb = 1024 * 1024 * 4 / 2**20  # float32 weights of one head at 1,024 pieces
    assert peaks["explicit"][0] >= one_head_mb and peaks["linear"][0] < peaks["explicit"][0] / 4
    assert all(mb >= 0 for kernel in peaks.values() for mb in kernel)


def test_the_cli_writes_the_api_s_numbers(tiny_models, tmp_path):
    out = tmp_path / "e.json"
    done = cli("efficiency", TEXT, "--model-dir", str(tiny_models["bert"]), "--pattern", "longformer:2:1",
               "--json", str(out))
    assert done.returncode == 0, done.stderr
    written = json.loads(out.read_text())
    run = with_pattern(load_model(tiny_models["bert"]), TEXT, "longformer:2:1")
    assert written["pattern"] == "longformer:2:1" and written["tokens"] == list(run.tokens)
    assert torch.allclose(torch.tensor(written["kept_mass"]), torch.as_tensor(run.kept_mass).float(), atol=1e-5)
    assert torch.allclose(torch.tensor(written["last_hidden"]).float(), torch.as_tensor(run.last_hidden), atol=1e-6)
    bench = tmp_path / "b.json"
    done = cli("efficiency", "--bench", "--model-dir", str(tiny_models["bert"]), "--lengths", "64,256", "--kernels",
               "fused,window", "--window", "16", "--json", str(bench))
    assert done.returncode == 0, done.stderr
    measured = json.loads(bench.read_text())
    assert measured["lengths"] == [64, 256] and set(measured["kernels"]) == {"fused", "window"}
    assert all(mb is not None and mb >= 0 for mb in measured["kernels"]["fused"]["peak_mb"])


@pytest.mark.slow
def test_a_window_on_minilm_equals_transformers_given_the_band(bundled):
    from transformers import AutoModel

    run = with_pattern(bundled, TEXT, "window:4")
    reference = AutoModel.from_pretrained(bundled.model_dir, attn_implementation="eager", local_files_only=True)
    with torch.inference_mode():
        out = reference(input_ids=run.dense.batch.input_ids, attention_mask=additive(torch.as_tensor(run.allowed)))
    assert torch.allclose(torch.as_tensor(run.last_hidden), out.last_hidden_state[0], atol=1e-4)
