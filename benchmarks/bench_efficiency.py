"""Issue 48: the cost of attention's kernels measured side by side in one run, and what a window does to it → animal.

Printed:
- each kernel's growth from 2,048 to 8,192 pieces (one layer of the model's attention: explicit ≈ 16×, window and
  linear ≈ 4×; targets: explicit ≥ 8×, window and linear ≤ 6×), the log–log slopes, and where the curves cross;
- the window kernel against masked explicit attention (the n × n scores computed, then the band kept) at 8,192
  pieces (target ≥ 3× faster);
- a patterned run of the model against a dense run of the same text (the mask rides in the bias: about the same);
- with --heads: for MiniLM, SmolLM2 and Gemma 3, which heads lose the it → animal link first as a window narrows.

    .venv/bin/python benchmarks/bench_efficiency.py [--model M] [--heads]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mha_core import load_model  # noqa: E402
from mha_core.analysis.coref.sentence import antecedent_scores  # noqa: E402
from mha_core.analysis.efficiency.cost import attention_cost, growth, inputs, model_shape  # noqa: E402
from mha_core.analysis.efficiency.fidelity import with_pattern  # noqa: E402
from mha_core.analysis.efficiency.patterns import allowed_keys, parse_pattern  # noqa: E402
from mha_core.engine.allowed import AllowedKeys, allowed_bias  # noqa: E402
from mha_core.engine.forward import run  # noqa: E402
from mha_core.serving.menu import available_models  # noqa: E402
from mha_core.teaching.examples import compared_words  # noqa: E402

TEXT = "The animal didn't cross the street because it was too tired."
WINDOWS = (12, 10, 8, 7, 6, 5, 4, 3, 2, 1)


def masked_explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """The band by masking: every head's n × n scores, the band's bias added, softmax, one head at a time."""
    bias = allowed_bias(allowed_keys(parse_pattern(f"window:{window}"), q.shape[1], False), q.dtype)[0, 0]
    scale = q.shape[-1] ** -0.5
    return torch.stack([torch.softmax(q[h] @ k[h].T * scale + bias, -1) @ v[h] for h in range(q.shape[0])])


def best_of(fn: object, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def kernels(heads: int, head_dim: int) -> None:
    cost = attention_cost([2048, 4096, 8192], heads, head_dim)
    for kernel in cost.seconds:
        print(f"{kernel:9s} 2048 -> 8192: {growth(cost, kernel):5.1f}x  slope {cost.slopes[kernel]:.2f}  seconds "
              f"{[round(s, 4) for s in cost.seconds[kernel]]}  peak MB {cost.peak_mb[kernel]}", flush=True)
    for first, second in (("explicit", "fused"), ("fused", "window"), ("fused", "linear"), ("window", "linear")):
        crossing = cost.crossing(first, second)
        print(f"{second} overtakes {first}: " + (f"at about {crossing:,.0f} pieces" if crossing else
                                                  "not within 2,048-8,192 (" + ("always faster" if
                                                  cost.seconds[second][0] < cost.seconds[first][0] else "never") + ")"))
    q, k, v = inputs(8192, heads, head_dim, "cpu")
    window = cost.window
    from mha_core.analysis.efficiency.cost import window_attention

    masked = best_of(lambda: masked_explicit(q, k, v, window), 2)
    banded = best_of(lambda: window_attention(q, k, v, window))
    print(f"window kernel vs masked explicit at 8,192 pieces (W = {window}): {masked:.3f} s / {banded:.3f} s = "
          f"{masked / banded:.1f}x faster (target >= 3x)", flush=True)


def patterned_run(model: object) -> None:
    text = " ".join([TEXT] * 30)
    ids = run(model, text, "explicit").batch.input_ids.shape[1]
    allowed = AllowedKeys(allowed_keys(parse_pattern("window:16"), ids, model.arch.causal))
    dense = best_of(lambda: run(model, text, "fused"))
    patterned = best_of(lambda: run(model, text, "fused", allowed=allowed))
    print(f"{model.name}, {ids} pieces, fused path: dense run {dense:.3f} s, window:16 run {patterned:.3f} s "
          f"(ratio {patterned / dense:.2f}: the mask rides in the bias; the model still computes n² scores)")


def heads_losing_the_link(name: str) -> None:
    """Each head that links it -> animal densely: the widest window at which it no longer prefers 'animal'."""
    model = load_model(next(c.path for c in available_models() if c.name == name))
    words, pronoun, candidates = compared_words(TEXT)
    dense = with_pattern(model, TEXT, "dense")
    scores = antecedent_scores(dense.dense, 0, words, pronoun, candidates).scores  # (2,L,H)
    linked = [(int(layer), int(head)) for layer, head in zip(*torch.nonzero(torch.as_tensor(scores[0] - scores[1])
                                                                           > 0.05, as_tuple=True), strict=True)]
    lost = {}
    for window in WINDOWS:
        patterned = with_pattern(model, TEXT, f"window:{window}").patterned
        now = antecedent_scores(patterned, 0, words, pronoun, candidates).scores
        for layer, head in linked:
            if (layer, head) not in lost and now[0, layer, head] <= now[1, layer, head]:
                lost[(layer, head)] = window
    first = sorted(lost.items(), key=lambda item: -item[1])[:5]
    print(f"{name}: {len(linked)} heads prefer 'animal' by > 0.05 densely; the first to lose it as the window "
          f"narrows (head: widest window at which it prefers 'street'): "
          + ", ".join(f"L{layer}H{head}: W={w}" for (layer, head), w in first)
          + f"; {len(linked) - len(lost)} keep it down to W = 1", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--heads", action="store_true", help="which heads lose it -> animal first, three models")
    args = parser.parse_args()
    model = load_model(next(c.path for c in available_models() if c.name == args.model))
    heads, head_dim = model_shape(model)
    print(f"{model.name}: one layer's attention, {heads} heads x {head_dim}", flush=True)
    kernels(heads, head_dim)
    patterned_run(model)
    if args.heads:
        for name in ("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "gemma-3-270m"):
            heads_losing_the_link(name)


if __name__ == "__main__":
    main()
