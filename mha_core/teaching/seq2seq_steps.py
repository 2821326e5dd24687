"""Cross-attention, step by step, for one decoder layer and head: Q from the decoder's states, K and V projected
here from the encoder's output, the T × S scores, their softmax (checked against the map the run kept), and each
target piece's context vector.

Shapes: T target pieces, S source positions, D d_model, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_core.engine.attention import keys_values
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.seq2seq.forward import Seq2SeqResult
from mha_core.messages import N_


@dataclass(frozen=True)
class CrossSteps:
    layer: int
    head: int
    memory: np.ndarray  # (S,D) the encoder's output (after its final norm): what K and V are made from
    q: np.ndarray  # (T,Dh) the head's queries, from the decoder's states
    k: np.ndarray  # (S,Dh) memory @ W_K[head] + b_K[head]
    v: np.ndarray  # (S,Dh) memory @ W_V[head] + b_V[head]
    scale: float  # 1/√Dh (T5: 1)
    probs: np.ndarray  # (T,S) softmax(q k^T · scale)
    context: np.ndarray  # (T,Dh) probs @ v
    kept_difference: float  # the largest difference from the map the run kept (or rebuilt from its log-sum-exp)

    @property
    def scores(self) -> np.ndarray:
        """(T,S) q kᵀ · scale: the scores before the softmax."""
        return self.q @ self.k.T * self.scale

    def outside_share(self, kept: int) -> float:
        """The mean share of a row's weight on the source positions from `kept` on (Whisper's padding silence)."""
        return float(self.probs[:, kept:].sum(-1).mean())

    def rows(self) -> list[tuple[str, str, str]]:
        """(step, formula, shape) for the page's table."""
        t, s, dh = self.q.shape[0], self.k.shape[0], self.q.shape[1]
        d = self.memory.shape[1]
        return [(N_("encoder output"), "H_enc", f"{s} × {d}"),
                (N_("queries, from the decoder"), "X_dec·W_Q", f"{t} × {dh}"),
                (N_("keys, from the encoder"), "H_enc·W_K", f"{s} × {dh}"),
                (N_("values, from the encoder"), "H_enc·W_V", f"{s} × {dh}"),
                (N_("scores"), f"Q·Kᵀ × {self.scale:.4g}", f"{t} × {s}"),
                (N_("weights (each row sums to 1)"), "softmax(…)", f"{t} × {s}"),
                (N_("context"), "A·V", f"{t} × {dh}")]


@torch.inference_mode()
def cross_steps(model: LoadedModel, result: Seq2SeqResult, layer: int, head: int, b: int = 0) -> CrossSteps:
    """One cross-attention head recomputed in the open from the run's decoder queries and the encoder's output."""
    s, t = result.encoder.lengths[b], result.decoder.lengths[b]
    memory = result.encoder.last_hidden_state[b:b + 1, :s]  # (1,S,D) in the model's precision
    keys, values = keys_values(model.decoder.layers[layer].cross_attention, memory)  # (1,G,S,Dh)
    k, v = keys[0, head].float().cpu(), values[0, head].float().cpu()  # (S,Dh) the head's (G = H here)
    q = result.cross.layer_q[layer][b, head, :t].float().cpu()  # (T,Dh)
    scale = result.cross.scale
    probs = torch.softmax(q @ k.T * scale, dim=-1)  # (T,S)
    kept = result.cross.text_maps(b)[layer, head].cpu()  # (T,S)
    return CrossSteps(layer, head, memory[0].float().cpu().numpy(), q.numpy(), k.numpy(), v.numpy(), scale,
                      probs.numpy(), (probs @ v).numpy(), float((probs - kept).abs().max()))
