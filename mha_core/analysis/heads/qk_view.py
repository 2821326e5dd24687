"""The joint query-key view of one head (AttentionViz, Yeh et al., IEEE VIS 2023): every token's query and key
vector over a corpus, normalised so that distance reflects attention, projected together into 2-D.

Shapes: M tokens kept by the corpus pass, Dh head dim, P = 2M points (the M queries, then the M keys),
T_s pieces of one sentence.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.corpus.passes import CorpusPass
from mha_core.analysis.heads import projection
from mha_core.analysis.heads.projection import PCA, PROJECTIONS, SEED, nonlinear, pca
from mha_core.analysis.heads.roles import top_indices
from mha_core.engine.attention import causal_bias, kv_head
from mha_core.engine.children import ChildPool
from mha_core.engine.heads import checked_head
from mha_core.engine.tokens import InputError
from mha_core.messages import N_, Worded

BY_KIND, BY_POSITION, BY_TOKEN, BY_POS = N_("query / key"), N_("position"), N_("token"), N_("part of speech")
COLOUR_BY = (BY_KIND, BY_POSITION, BY_TOKEN, BY_POS)
TOP_TOKENS = 12  # colour by token: the most frequent pieces, the rest is "other"
CONTEXT_CHARS = 60  # hover: characters of the sentence shown either side of the token
PROJECTION_CHILDREN = ChildPool(Path(projection.__file__))  # kept between projections: UMAP compiles once


@dataclass(frozen=True)
class Normalised:
    """Queries and keys after AttentionViz's normalisation; every attention row is unchanged."""

    queries: Tensor  # (M,Dh) float64: s * q
    keys: Tensor  # (M,Dh) float64: k / s + c
    scale: float  # s: queries times s, keys divided by s (each score q.k unchanged)
    translation: Tensor  # (Dh,) c added to every key (a query's scores all shift by q.c: softmax unchanged)
    mean_norm: float  # the mean norm of the queries, equal to that of the keys


def normalise(q: Tensor, k: Tensor, steps: int = 80) -> Normalised:
    """Scale, then translate the keys so that their mean equals the queries' mean; s is chosen (by bisection)
    so that afterwards queries and keys have the same mean norm. q, k: (M,Dh)."""
    q64, k64 = q.double(), k.double()
    q_mean, k_centred = q64.mean(0), k64 - k64.mean(0)  # (Dh,), (M,Dh)
    norm_q = q64.norm(dim=1).mean()
    # With t = 1/s^2 the condition mean|s q| = mean|(k - mean k)/s + s mean q| reads
    # mean|q| = g(t) = mean|t (k - mean k) + mean q|; g is convex with g(0) = |mean q| <= mean|q|: one crossing.
    # |t kc + qm|^2 = t^2 |kc|^2 + 2 t kc.qm + |qm|^2: three numbers per key, so each step costs O(M).
    sq, dot, qm2 = (k_centred * k_centred).sum(1), k_centred @ q_mean, float(q_mean @ q_mean)  # (M,), (M,), ()
    gap = lambda log_t: float(torch.sqrt(  # noqa: E731
        (math.exp(2 * log_t) * sq + 2 * math.exp(log_t) * dot + qm2).clamp_min(0)).mean() - norm_q)
    low, high = -60.0, 60.0
    if gap(low) >= 0 or gap(high) <= 0:  # every query the same, or every key the same: keep s = 1
        low = high = 0.0
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if gap(mid) < 0 else (low, mid)
    s = math.exp(-(low + high) / 4)  # t = 1/s^2
    queries, keys = s * q64, k_centred / s + s * q_mean  # (M,Dh)
    translation = s * q_mean - k64.mean(0) / s  # (Dh,): keys = k / s + translation
    return Normalised(queries, keys, s, translation, float(queries.norm(dim=1).mean()))


@dataclass(frozen=True)
class QKView:
    layer: int
    head: int
    kv_head: int  # the key/value head serving this query head (grouped-query attention)
    method: str  # PCA, UMAP or t-SNE
    xy: np.ndarray  # (P,2): queries 0..M-1, then keys M..2M-1
    scale: float  # s of the normalisation
    translation_norm: float  # |c|
    mean_norm: float  # the common mean norm of queries and keys after normalisation
    explained: tuple[float, float] | None  # PCA: share of the variance on each axis

    @property
    def n_tokens(self) -> int:
        return len(self.xy) // 2


def kv_head_of(corpus: CorpusPass, head: int) -> int:
    return kv_head(head, corpus.n_heads, corpus.n_kv_heads)


def check_head(corpus: CorpusPass, layer: int, head: int) -> None:
    checked_head(Worded(N_("The model")), corpus.n_layers, corpus.n_heads, layer, head)
    if corpus.kept == 0:
        raise InputError("qk_no_sentence_kept", N_("No sentence was kept for the query-key view."))


def qk_view(
    corpus: CorpusPass,
    layer: int,
    head: int,
    method: str = PCA,
    seed: int = SEED,
    check: Callable[[], None] | None = None,
) -> QKView:
    """Head `head` of `layer`: queries and keys (after RoPE) of every kept token, normalised, projected to 2-D."""
    check_head(corpus, layer, head)
    if method not in PROJECTIONS:
        raise InputError(
            "unknown_projection",
            N_("Unknown projection {method!r}: choose one of {projections}."),
            method=method,
            projections=", ".join(PROJECTIONS),
        )
    kv = kv_head_of(corpus, head)
    norm = normalise(corpus.layer_q[layer][:, head], corpus.layer_k[layer][:, kv])
    points = torch.cat([norm.queries, norm.keys]).numpy()  # (P,Dh)
    xy, explained = project(points, method, seed, check)
    return QKView(layer, head, kv, method, xy, norm.scale, float(norm.translation.norm()), norm.mean_norm, explained)


def project(
    points: np.ndarray, method: str, seed: int = SEED, check: Callable[[], None] | None = None
) -> tuple[np.ndarray, tuple[float, float] | None]:
    """(P,Dh) -> (P,2), and for PCA the share of the variance each axis keeps. With `check`, t-SNE and UMAP run in
    a child process that is killed as soon as check() raises (a server's job that nobody waits for)."""
    if method == PCA:
        return pca(points)
    if check is None:
        return nonlinear(points, method, seed), None
    with tempfile.TemporaryDirectory(prefix="mha-projection-") as folder:
        source, target = Path(folder) / "points.npy", Path(folder) / "xy.npy"
        np.save(source, points)
        PROJECTION_CHILDREN.request([str(source), str(target), method, str(seed)], check)
        return np.load(target), None


def attention_row(corpus: CorpusPass, layer: int, head: int, token: int) -> np.ndarray:
    """Token `token`'s attention over the keys of its own sentence, (T_s,), recomputed from the kept q and k
    (the scale, soft-cap, ALiBi, causal mask and the layer's sliding window as in the model)."""
    check_head(corpus, layer, head)
    sentence = int(corpus.sentence_of[token])
    start, stop = int(corpus.starts[sentence]), int(corpus.starts[sentence + 1])
    q = corpus.layer_q[layer][token, head]  # (Dh,)
    k = corpus.layer_k[layer][start:stop, kv_head_of(corpus, head)]  # (T_s,Dh)
    arch = corpus.arch
    scores = (k @ q) * (arch.scale if arch.scale is not None else q.shape[0] ** -0.5)  # (T_s,)
    if arch.attn_softcap is not None:
        scores = torch.tanh(scores / arch.attn_softcap) * arch.attn_softcap
    if arch.alibi:  # the slope of this head times each key's position in the sentence
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        slopes = build_alibi_tensor(torch.ones(1, stop - start), corpus.n_heads, scores.dtype)  # (H,1,T_s)
        scores = scores + slopes[head, 0]
    if corpus.causal:  # the model's own mask (attention.causal_bias), this query's row
        window = arch.windows[layer]
        scores = scores + causal_bias(stop - start, scores.dtype, window=window)[0, 0, token - start]
    return torch.softmax(scores, dim=0).numpy()


def strongest_keys(corpus: CorpusPass, layer: int, head: int, token: int, k: int = 5) -> list[tuple[int, str, float]]:
    """(position in the sentence, piece, attention) of the `k` keys this query attends to most."""
    row = attention_row(corpus, layer, head, token)
    start = int(corpus.starts[corpus.sentence_of[token]])
    return [(int(j), corpus.labels[start + j], float(row[j])) for j in top_indices(row, k)]


def marked_sentence(corpus: CorpusPass, token: int, width: int = CONTEXT_CHARS) -> str:
    """The token's sentence with the token marked ⟦…⟧, cut to `width` characters either side."""
    text = corpus.texts[int(corpus.sentence_of[token])]
    if corpus.special[token]:
        return f"⟦{corpus.labels[token]}⟧ {text[: 2 * width]}"
    begin, end = (int(x) for x in corpus.spans[token])
    left = ("…" if begin > width else "") + text[max(0, begin - width) : begin]
    right = text[end : end + width] + ("…" if end + width < len(text) else "")
    return f"{left}⟦{text[begin:end]}⟧{right}"


def colour_groups(corpus: CorpusPass, by: str, pos: tuple[str, ...] | None = None) -> list[tuple[str, np.ndarray]]:
    """Named groups of point indices (P = 2M points) for one scatter trace each. `position` is not grouped:
    it is one group per kind, coloured by value. `pos`: each token's part of speech (token_pos)."""
    m = len(corpus.labels)
    queries, keys = np.arange(m), np.arange(m, 2 * m)
    if by in (BY_KIND, BY_POSITION):
        return [(N_("query"), queries), (N_("key"), keys)]
    if by == BY_TOKEN:
        names = np.array(corpus.labels, dtype=object)
        common = [label for label, _ in Counter(corpus.labels).most_common(TOP_TOKENS)]
    elif by == BY_POS and pos is not None:
        names = np.array(pos, dtype=object)
        common = [tag for tag, _ in Counter(pos).most_common()]
    else:
        raise InputError(
            "unknown_colouring",
            N_("Unknown colouring {by!r}: choose one of {colour_by}."),
            by=by,
            colour_by=", ".join(COLOUR_BY),
        )
    doubled = np.concatenate([names, names])  # (P,) the token's name for its query and its key
    groups = [(name, np.flatnonzero(doubled == name)) for name in common]
    rest = np.flatnonzero(~np.isin(doubled, common))
    return groups + ([(N_("other"), rest)] if len(rest) else [])


def token_pos(corpus: CorpusPass) -> tuple[str, ...]:
    """Each kept token's universal part of speech from spaCy (the piece's first character decides); special
    tokens are "special", pieces spaCy leaves out (spaces) "space"."""
    from mha_core.analysis.corpus.readers import spacy_pipeline

    tags = []
    for sentence, doc in enumerate(spacy_pipeline().pipe(corpus.texts[: corpus.kept])):
        by_char = {}
        for tok in doc:
            by_char.update(dict.fromkeys(range(tok.idx, tok.idx + len(tok.text)), tok.pos_))
        text = corpus.texts[sentence]
        for token in range(int(corpus.starts[sentence]), int(corpus.starts[sentence + 1])):
            begin, end = (int(x) for x in corpus.spans[token])
            first = next((c for c in range(begin, end) if not text[c].isspace()), None)
            tags.append("special" if corpus.special[token] else by_char.get(first, "space"))
    return tuple(tags)
