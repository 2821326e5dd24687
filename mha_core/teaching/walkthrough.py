"""The classroom walkthrough: multi-head attention of one layer, step by step, on the real tensors.

Shapes: T tokens, D d_model, H heads, Dh head dim (= d_k). Every tensor here is read from the model's own run
(run_with_cache on the explicit path: the layer's hook points), so the steps add up to the model's own output
(checked by `parity`); what no point holds is one step on from one: the normed input, Q before RoPE, Q·Kᵀ, the
concatenation and W_O.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from mha_core.analysis.heads.roles import top_indices
from mha_core.engine import attention
from mha_core.engine.attention import EXPLICIT, attention_bias, heads_sharing, kv_head, merge_heads
from mha_core.engine.forward import run
from mha_core.engine.held import kept
from mha_core.engine.hooked import run_with_cache
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.teaching.step_shapes import scale_note, step_shapes, width_note

PATH_HELP = N_("The path is how these maps were computed. explicit: softmax(QKᵀ/√d_k) written out step by step, every "
               "map kept. fused: PyTorch's scaled_dot_product_attention kernel (faster, keeps no maps), each map "
               "rebuilt exactly from its log-sum-exp. auto picks fused for long texts. The backend is the kernel that "
               "ran. Both paths agree to float precision (Walkthrough: Parity).")
PATH_NAMES = {"explicit": N_("explicit"), "fused": N_("fused"), "auto": N_("auto")}


def path_words(path: str) -> str:
    """A path's name in the page's language."""
    return tr(PATH_NAMES.get(path, path))


def backend_words(backend: str) -> str:
    """The kernel that ran (AttentionOutput.backend), in the page's language: kernel and device names (flash,
    efficient, CPU, CUDA, float16) as they are, the rest translated."""
    if backend.startswith("explicit"):
        return tr("explicit (matmul + softmax)")
    return backend.replace(", causal", tr(", in its causal mode"))


@dataclass(frozen=True)
class Walkthrough:
    tokens: tuple[str, ...]  # T
    layer: int
    head: int
    x: np.ndarray  # (T,D) what attention reads: the layer's input (pre-norm models: after the layer's norm)
    q: np.ndarray  # (H,T,Dh) after RoPE where the model rotates
    q_unrotated: np.ndarray | None  # (H,T,Dh) before RoPE; None without RoPE
    q_projected: np.ndarray | None  # (H,T,Dh) straight from W_Q, before QK-norm; None without QK-norm
    k: np.ndarray  # (G,T,Dh) one per key/value head (G = H unless grouped-query attention)
    v: np.ndarray  # (G,T,Dh)
    raw_scores: np.ndarray  # (T,T) q k^T of the chosen head, before scaling (and before any mask)
    visible: np.ndarray  # (T,T) bool: keys each query may see (all; causal models: j <= i)
    scale: float  # 1 / sqrt(d_k) (Gemma: 1 / sqrt(query_pre_attn_scalar))
    probs: np.ndarray  # (T,T) softmax(cap(raw_scores * scale) + position_bias + mask) of the chosen head
    position_bias: np.ndarray | None  # (T,T) the chosen head's bias on its scores by position: ALiBi's (BLOOM) or
    #                                   T5's relative-position buckets; else None
    softcap: float | None  # Gemma 2: scores -> tanh(s / c) · c before the bias
    context: np.ndarray  # (H,T,Dh) every head's probs @ v
    concat: np.ndarray  # (T,D) heads side by side
    output: np.ndarray  # (T,D) concat @ W_O^T + b_O

    def strongest_keys(self, query: int, k: int = 3) -> list[int]:
        """The `k` keys the chosen head's query attends to most, strongest first."""
        return [int(j) for j in top_indices(self.probs[query], k)]

    @property
    def group(self) -> int:
        """Query heads served by each key/value head (1 for MHA)."""
        return self.q.shape[0] // self.k.shape[0]

    @property
    def kv_head(self) -> int:
        """The key/value head the chosen head reads."""
        return kv_head(self.head, self.q.shape[0], self.k.shape[0])

    @property
    def sharing(self) -> range:
        """The query heads that share the chosen head's keys and values (itself included)."""
        return heads_sharing(self.kv_head, self.q.shape[0], self.k.shape[0])


HEADS_FIRST = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k", "attn.hook_z")


def layer_points(model: LoadedModel, result: AttentionResult, layer: int, b: int) -> dict[str, torch.Tensor]:
    """Text b of `result` run again with run_with_cache on the explicit path: `layer`'s hook points by their short
    name ("attn.hook_q"), the heads' tensors heads first (1,H,T,Dh) as multi_head_attention holds them."""
    stack = replace(model, decoder=None)  # an encoder–decoder's walkthrough is its encoder's (the result's stack)
    block = f"{'vision.' if model.arch.image else ''}blocks.{layer}."
    _, cache = run_with_cache(stack, result.batch.one(b), lambda name: name.startswith(block), path=EXPLICIT)
    points = {name.removeprefix(block): tensor for name, tensor in cache.items()}
    return {name: tensor.transpose(1, 2) if name in HEADS_FIRST else tensor for name, tensor in points.items()}


@torch.inference_mode()
def walkthrough(model: LoadedModel, result: AttentionResult, layer: int, head: int, b: int = 0) -> Walkthrough:
    """One layer's attention, step by step, as the model's own run computes it (its hook points)."""
    lw, arch = model.layers[layer], model.arch
    n = result.lengths[b]
    seen = layer_points(model, result, layer, b)
    x = seen["hook_resid_pre"].float()  # (1,T,D) the layer's input
    x = lw.attn_norm(x) if arch.pre_norm else x  # pre-norm: attention reads the normed stream
    projected = seen["attn.hook_q"]  # (1,H,T,Dh) straight from W_Q
    q, k, v = seen.get("attn.hook_rot_q", projected), seen.get("attn.hook_rot_k", seen["attn.hook_k"]), seen[
        "attn.hook_v"]  # (1,H,T,Dh), (1,G,T,Dh), (1,G,T,Dh): after QK-norm and RoPE where the model has them
    unrotated = (projected if lw.attention.q_norm is None else lw.attention.q_norm(projected)) if arch.rotary else None
    context = seen["attn.hook_z"]  # (1,H,T,Dh)
    concat = merge_heads(context)  # (1,T,D)
    scale = arch.scale if arch.scale is not None else q.shape[-1] ** -0.5
    raw = q[0, head] @ k[0, head * k.shape[1] // q.shape[1]].T  # (T,T) the head's key/value head
    masked = attention_bias(torch.ones(1, n, dtype=torch.long), x.dtype, arch.causal, arch.windows[layer])  # (1,1,T,T)
    visible = np.ones((n, n), dtype=bool) if masked is None else np.broadcast_to((masked[0, 0] == 0).numpy(), (n, n))
    bias = result.added_bias(layer, b) if arch.alibi or arch.relative_bias else None  # ALiBi's or T5's, and the mask
    position_bias = None if bias is None else (bias[..., :n, :n] - (masked if masked is not None else 0))[
        0, head].expand(n, n).numpy()
    return Walkthrough(
        tokens=result.labels[b], layer=layer, head=head, x=x[0].numpy(), q=q[0].numpy(),
        q_unrotated=None if unrotated is None else unrotated[0].numpy(),
        q_projected=projected[0].numpy() if arch.qk_norm else None, k=k[0].numpy(), v=v[0].numpy(),
        raw_scores=raw.numpy(), visible=visible, scale=scale, probs=seen["attn.hook_pattern"][0, head].numpy(),
        position_bias=position_bias, softcap=arch.attn_softcap, context=context[0].numpy(), concat=concat[0].numpy(),
        output=F.linear(concat, lw.attention.w_o, lw.attention.b_o)[0].numpy(),  # concat @ W_O^T + b_O
    )


def softmax_at_scale(raw_row: np.ndarray, scale: float, visible: np.ndarray | None = None,
                     alibi_row: np.ndarray | None = None, softcap: float | None = None) -> np.ndarray:
    """softmax(raw * scale) of one row over the keys it may see: scale 1/sqrt(d_k) is the model's; 1 shows it
    unscaled. Keys outside `visible` (a causal model's later tokens) get exactly 0. Gemma 2's soft-cap and BLOOM's
    ALiBi bias apply as in the model, so the model's scale gives the model's row."""
    z = raw_row * scale
    if softcap is not None:
        z = np.tanh(z / softcap) * softcap
    if alibi_row is not None:
        z = z + alibi_row
    z = np.where(visible, z, -np.inf) if visible is not None else z
    e = np.exp(z - z.max())
    return e / e.sum()


def row_entropy(p: np.ndarray) -> float:
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


@kept("walkthrough code")
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


MAPS_TOLERANCE = 1e-5  # attention weights lie in [0, 1]: float32 agrees far closer
HIDDEN_TOLERANCE, HIDDEN_RELATIVE = 1e-4, 2e-6  # a hidden state: 1e-4, or 2e-6 of its largest value where larger


@dataclass(frozen=True)
class Parity:
    max_map_vs_model: float  # our explicit maps vs the model's own (eager) attentions
    max_hidden_vs_model: float  # our last hidden state vs the model's
    max_map_explicit_vs_fused: float  # explicit maps vs maps rebuilt from the fused kernel's LSE
    backend: str  # the fused path's kernel
    hidden_scale: float  # the largest |value| of the model's last hidden state

    @property
    def hidden_tolerance(self) -> float:
        """Float32 rounding grows with the values: Gemma 3's last hidden state reaches ~180 on a Chinese sentence,
        where ours and the model's differ by 1.4e-4 (8e-7 of it; transformers' own SDPA model differs from its eager
        one by as much: tests/test_gemma.py)."""
        return max(HIDDEN_TOLERANCE, HIDDEN_RELATIVE * self.hidden_scale)

    @property
    def ok(self) -> bool:
        """Within float precision: maps to 1e-5, the last hidden state to hidden_tolerance."""
        return (max(self.max_map_vs_model, self.max_map_explicit_vs_fused) <= MAPS_TOLERANCE
                and self.max_hidden_vs_model <= self.hidden_tolerance)


@dataclass(frozen=True)
class PathTimings:
    """Fastest of `repeats` runs after a warm-up, in ms."""

    explicit_ms: float
    fused_ms: float
    model_ms: float
    repeats: int


def best_ms(fn: Callable[[], object], repeats: int = 3) -> float:
    """fn's fastest time in ms over `repeats` runs after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times)


def reference_forward(model: LoadedModel, result: AttentionResult) -> Callable[[], object]:
    """The transformers model itself (eager, with attentions) on the same word pieces as `result` (an
    encoder–decoder read as its encoder: its encoder module)."""
    ids, mask = result.batch.input_ids.to(model.device), result.batch.attention_mask.to(model.device)
    module = model.model.get_encoder() if model.config.is_encoder_decoder else model.model
    return lambda: module(input_ids=ids, attention_mask=mask, output_attentions=True)


@torch.inference_mode()
def parity(model: LoadedModel, text: str, explicit: AttentionResult | None = None) -> Parity:
    """Recompute `text` on both paths (reusing `explicit` when given), and through the model itself; compare."""
    explicit = explicit if explicit is not None else run(model, text, path="explicit")
    fused = run(model, text, path="fused")
    ref = reference_forward(model, explicit)()
    ours = explicit.attention()[0]  # (L,H,T,T)
    return Parity(
        max_map_vs_model=float((ours - torch.stack(ref.attentions, dim=1)[0].float()).abs().max()),
        max_hidden_vs_model=float((explicit.last_hidden_state - ref.last_hidden_state).abs().max()),
        max_map_explicit_vs_fused=float((fused.attention()[0] - ours).abs().max()),
        backend=fused.backend,
        hidden_scale=float(ref.last_hidden_state.abs().max()),
    )


@torch.inference_mode()
def time_paths(model: LoadedModel, text: str, repeats: int = 3) -> PathTimings:
    """Time the explicit path, the fused path and the model itself on `text` (only when a user asks)."""
    explicit = run(model, text, path="explicit")
    return PathTimings(
        explicit_ms=best_ms(lambda: run(model, text, path="explicit"), repeats),
        fused_ms=best_ms(lambda: run(model, text, path="fused"), repeats),
        model_ms=best_ms(reference_forward(model, explicit), repeats), repeats=repeats,
    )


def window_note(windows: tuple[int | None, ...], layer: int) -> str | None:
    """Which keys a query of this layer sees, where the model has sliding windows."""
    window, globals_ = windows[layer], [str(i) for i, w in enumerate(windows) if w is None]
    if window is None:
        if not globals_ or len(globals_) == len(windows):
            return None
        local = next(w for w in windows if w is not None)
        return tr("Layer {layer} is a global layer: each query sees every earlier token; the local layers see only a "
                  "window of the {local} most recent.", layer=layer, local=local)
    if globals_:
        return tr("Layer {layer} is a local layer: each query sees only itself and the {before} tokens before it (a "
                  "sliding window of {window}); the global layers ({globals}) see every earlier token.", layer=layer,
                  before=window - 1, window=window, globals=", ".join(globals_))
    return tr("Layer {layer}: each query sees only itself and the {before} tokens before it (a sliding window of "
              "{window}).", layer=layer, before=window - 1, window=window)


def design_notes(model: LoadedModel, layer: int) -> tuple[str, ...]:
    """What this model's attention does beyond the four steps of the paper, one sentence each, for this layer (in
    the running context's language)."""
    arch, cap = model.arch, model.arch.attn_softcap
    shapes = step_shapes(model, layer, 1)  # the layer's widths and scale (the token count plays no part here)
    notes = [
        arch.qk_norm and tr("QK-norm: after the projections and before RoPE, each head's query and key vectors are "
                            "RMS-normalised over their d_k features (times a learned gain), which keeps the scores' "
                            "size in check."),
        window_note(arch.windows, layer),
        arch.alibi and tr("ALiBi: no position embedding is added; each head adds slope × (key position) to its "
                          "scores, which within a query's row is −slope × distance plus a constant (the softmax "
                          "ignores it): far keys are penalised, by a slope that halves from head to head."),
        arch.relative_bias and tr("Relative position bias (T5): no position embedding is added; each head adds a "
                                  "learned number to its scores for each bucket of key − query distance (exact for "
                                  "near keys, logarithmic buckets for far ones), and the scores are not scaled by "
                                  "1/√d_k."),
        cap is not None and tr("Soft-capping: the scaled scores pass through {cap:g}·tanh(s / {cap:g}) before the "
                               "mask, so no score exceeds it; no fused kernel does this, so the explicit path runs.",
                               cap=cap),
        arch.scale is not None and not arch.relative_bias and scale_note(shapes),
        width_note(shapes),
        len(set(arch.rope_kinds)) > 1 and tr("Local and global layers rotate with different RoPE bases."),
        arch.parallel and tr("Parallel block: attention and the MLP both read the layer's input, out = x + "
                             "attn(ln₁ x) + mlp(ln₂ x), instead of the MLP reading attention's result."),
        arch.sandwich and tr("Each sub-layer's output is normalised again before it is added to the stream (norms "
                             "before and after attention and the MLP)."),
        arch.embed_scale != 1.0 and tr("The word embeddings are multiplied by √d_model = {scale:.1f} before the first "
                                       "layer.", scale=arch.embed_scale),
    ]
    return tuple(note for note in notes if note)

