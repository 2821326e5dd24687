"""The classroom walkthrough: multi-head attention of one layer, step by step, on the real tensors.

Shapes: T tokens, D d_model, H heads, Dh head dim (= d_k). Every tensor here is recomputed from
the layer's input with the same functions `multi_head_attention` uses, so the steps add up to the
model's own output (checked by `parity`).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from mha_core import attention
from mha_core.attention import merge_heads, split_heads
from mha_core.encoder import run
from mha_core.model import LoadedModel
from mha_core.result import AttentionResult


@dataclass(frozen=True)
class Walkthrough:
    tokens: tuple[str, ...]  # T
    layer: int
    head: int
    x: np.ndarray  # (T,D) the layer's input
    q: np.ndarray  # (H,T,Dh)
    k: np.ndarray  # (H,T,Dh)
    v: np.ndarray  # (H,T,Dh)
    raw_scores: np.ndarray  # (T,T) q k^T of the chosen head, before scaling
    scale: float  # 1 / sqrt(d_k)
    probs: np.ndarray  # (T,T) softmax(raw_scores * scale) of the chosen head
    context: np.ndarray  # (H,T,Dh) every head's probs @ v
    concat: np.ndarray  # (T,D) heads side by side
    output: np.ndarray  # (T,D) concat @ W_O^T + b_O


@torch.inference_mode()
def walkthrough(model: LoadedModel, result: AttentionResult, layer: int, head: int, b: int = 0) -> Walkthrough:
    w = model.layers[layer].attention
    n = result.lengths[b]
    x = result.hidden_states[layer][b:b + 1, :n].float()  # (1,T,D)
    q = split_heads(F.linear(x, w.w_q, w.b_q), w.n_heads)  # (1,H,T,Dh)
    k = split_heads(F.linear(x, w.w_k, w.b_k), w.n_heads)  # (1,H,T,Dh)
    v = split_heads(F.linear(x, w.w_v, w.b_v), w.n_heads)  # (1,H,T,Dh)
    scale = q.shape[-1] ** -0.5
    raw = q[0, head] @ k[0, head].T  # (T,T)
    context, probs = attention.explicit_kernel(q, k, v, None, scale)  # (1,H,T,Dh), (1,H,T,T)
    concat = merge_heads(context)  # (1,T,D)
    output = F.linear(concat, w.w_o, w.b_o)  # (1,T,D)
    return Walkthrough(
        tokens=result.tokens[b], layer=layer, head=head, x=x[0].numpy(), q=q[0].numpy(), k=k[0].numpy(),
        v=v[0].numpy(), raw_scores=raw.numpy(), scale=scale, probs=probs[0, head].numpy(),
        context=context[0].numpy(), concat=concat[0].numpy(), output=output[0].numpy(),
    )


def softmax_at_scale(raw_row: np.ndarray, scale: float) -> np.ndarray:
    """softmax(raw * scale) of one row: scale 1/sqrt(d_k) is the model's; 1 shows it unscaled."""
    z = raw_row * scale
    e = np.exp(z - z.max())
    return e / e.sum()


def row_entropy(p: np.ndarray) -> float:
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


def code_for_step(step: int) -> str:
    """The code of mha_core that computes step 1-4 (project/split, attend, concatenate, W_O)."""
    if step == 2:
        return inspect.getsource(attention.explicit_kernel)
    if step == 3:
        return inspect.getsource(attention.merge_heads)
    source = [line[4:] for line in inspect.getsource(attention.multi_head_attention).splitlines()]
    begin = next(i for i, line in enumerate(source) if line.startswith("# 1." if step == 1 else "# 4."))
    end = next((i for i, line in enumerate(source) if i > begin and line.startswith("# ")), len(source))
    return "\n".join(source[begin:end])


@dataclass(frozen=True)
class Parity:
    max_map_vs_model: float  # our explicit maps vs the model's own (eager) attentions
    max_hidden_vs_model: float  # our last hidden state vs the model's
    max_map_explicit_vs_fused: float  # explicit maps vs maps rebuilt from the fused kernel's LSE
    backend: str  # the fused path's kernel
    explicit_ms: float
    fused_ms: float
    model_ms: float


def best_ms(fn: object, repeats: int = 3) -> tuple[object, float]:
    """fn's result and its fastest time in ms over `repeats` runs after one warm-up run."""
    result = fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return result, min(times)


@torch.inference_mode()
def parity(model: LoadedModel, text: str) -> Parity:
    """Recompute `text` on both paths, and through the model itself; compare and time each."""
    explicit, explicit_ms = best_ms(lambda: run(model, text, path="explicit"))
    fused, fused_ms = best_ms(lambda: run(model, text, path="fused"))
    ids, mask = explicit.batch.input_ids.to(model.device), explicit.batch.attention_mask.to(model.device)
    ref, model_ms = best_ms(lambda: model.model(input_ids=ids, attention_mask=mask, output_attentions=True))
    ours = explicit.attention()[0]  # (L,H,T,T)
    return Parity(
        max_map_vs_model=float((ours - torch.stack(ref.attentions, dim=1)[0].float()).abs().max()),
        max_hidden_vs_model=float((explicit.last_hidden_state - ref.last_hidden_state).abs().max()),
        max_map_explicit_vs_fused=float((fused.attention()[0] - ours).abs().max()),
        backend=fused.backend, explicit_ms=explicit_ms, fused_ms=fused_ms, model_ms=model_ms,
    )
