"""Head roles: what each head attends to, with the value the same metric takes under uniform
attention (the chance baseline), pattern types and role labels with stated thresholds.

Shapes: L layers, H heads, T tokens. Metrics are means over query rows; over a corpus, over all
query rows of all sentences (each row weighs the same).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mha_core.engine.drawable import Drawable
from mha_core.messages import N_

METRIC_TITLES = {  # marked for the catalogue: pages show them translated (metric_title)
    "cls": N_("to [CLS]"), "sep": N_("to [SEP]"), "punct": N_("to punctuation"),
    "prev": N_("to previous token"), "self": N_("to itself"), "next": N_("to next token"),
    "local": N_("within ±3 tokens"), "entropy": N_("breadth (entropy / ln n)"),
    "confidence": N_("confidence (row max)"),
}
# Thresholds, shown in the app as they are written here.
POSITIONAL_MIN = 0.5  # Clark et al.: previous / self / next heads
SPECIAL_MIN = 0.6  # Clark et al.: [CLS] / [SEP] / punctuation heads
BROAD_MIN = 0.9  # normalised entropy; Clark's 3.8 nats cannot fire on short sentences
PATTERN_RULES = (
    (N_("diagonal"), N_("previous + self + next ≥ 0.5")),
    (N_("vertical"), N_("[CLS] + [SEP] + punctuation ≥ 0.5")),
    (N_("vertical+diagonal"), N_("both of the above ≥ 0.25 and together ≥ 0.6")),
    (N_("block"), N_("≥ 0.6 within ±3 tokens, not diagonal or vertical")),
    (N_("heterogeneous"), N_("none of the above")),
)


def head_label(layer: int, head: int) -> str:
    """How every page, export and lesson names a head: "L<layer> H<head>", both 0-based."""
    return f"L{layer} H{head}"


def top_indices(values: np.ndarray, k: int | None = None) -> np.ndarray:
    """Flat indices of the `k` largest values (all when None), largest first, ties to the earliest: the one
    ranking behind every "strongest keys" list and every head ranking."""
    return np.argsort(-np.asarray(values), axis=None, kind="stable")[:k]


def ranked_heads(values: np.ndarray, k: int | None = None) -> list[tuple[int, int]]:
    """The (layer, head) cells of an (L,H) grid, largest value first, ties to the lower layer, then head; the first
    `k` (all when None). The one ranking every table, headline and lesson uses."""
    return [(int(i // values.shape[1]), int(i % values.shape[1])) for i in top_indices(values, k)]


def metric_title(name: str, causal: bool) -> str:
    """A metric's name as pages show it (marked, untranslated): a decoder's "cls" metric is its first token's."""
    return N_("to the first token") if name == "cls" and causal else METRIC_TITLES[name]


def first_token_label(causal: bool) -> str:
    """The role of a head that attends to the first token: [CLS] for an encoder, "first token" for a decoder
    (its attention sink)."""
    return "first token" if causal else "[CLS]"


def is_punctuation(token: str) -> bool:
    core = token.removeprefix("##").strip("␣↵")
    return bool(core) and all(unicodedata.category(c).startswith("P") for c in core)


def row_metrics(maps: np.ndarray, special_cls: Sequence[bool], special_sep: Sequence[bool],
                punct: Sequence[bool]) -> dict[str, np.ndarray]:
    """Per-row values of every metric for one text: maps (L,H,T,T) -> {metric: (L,H,T)}."""
    t = maps.shape[-1]
    cols = lambda flags: np.asarray(flags, dtype=bool)  # noqa: E731
    idx = np.arange(t)
    shifted = lambda k: np.where((idx + k >= 0) & (idx + k < t),  # noqa: E731
                                 maps[..., idx, np.clip(idx + k, 0, t - 1)], 0.0)
    local = np.abs(idx[:, None] - idx[None, :]) <= 3
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(maps > 0, maps * np.log(maps), 0.0)
    return {
        "cls": maps[..., cols(special_cls)].sum(-1), "sep": maps[..., cols(special_sep)].sum(-1),
        "punct": maps[..., cols(punct)].sum(-1),
        "prev": shifted(-1), "self": maps[..., idx, idx], "next": shifted(1),
        "local": (maps * local).sum(-1),
        "entropy": -plogp.sum(-1) / np.log(max(t, 2)), "confidence": maps.max(-1),
    }


@dataclass
class RoleAccumulator:
    """Sums of row metrics (and of their uniform-attention baselines) over texts."""

    sums: dict[str, np.ndarray] = field(default_factory=dict)  # metric -> (L,H)
    baseline_sums: dict[str, float] = field(default_factory=dict)
    rows: int = 0

    def add(self, maps: np.ndarray, tokens: Sequence[str], special: Sequence[bool], causal: bool = False) -> None:
        """maps (L,H,T,T) of one text without padding; special[i] is True for [CLS]/[SEP]/[BOS]-like pieces.
        `causal`: the baselines are uniform over the positions each query can see (itself and before)."""
        t = maps.shape[-1]
        cls = [s and i == 0 for i, s in enumerate(special)]
        sep = [s and i > 0 for i, s in enumerate(special)]
        punct = [not s and is_punctuation(tok) for tok, s in zip(tokens, special, strict=True)]
        for name, values in row_metrics(maps, cls, sep, punct).items():
            self.sums[name] = self.sums.get(name, 0) + values.sum(-1)
        uniform = np.full((1, 1, t, t), 1.0 / t)
        if causal:  # a decoder's query i can only spread its attention over keys 0..i
            uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
            uniform = uniform[None, None]
        for name, values in row_metrics(uniform, cls, sep, punct).items():
            self.baseline_sums[name] = self.baseline_sums.get(name, 0.0) + float(values.sum())
        self.rows += t

    def result(self) -> HeadRoles:
        means = {k: v / self.rows for k, v in self.sums.items()}
        baselines = {k: v / self.rows for k, v in self.baseline_sums.items()}
        return HeadRoles(means, baselines, self.rows)


@dataclass(frozen=True)
class HeadRoles(Drawable):
    metrics: dict[str, np.ndarray]  # metric -> (L,H) mean over query rows
    baselines: dict[str, float]  # metric -> the same mean under uniform attention
    rows: int  # query rows averaged over

    def patterns(self) -> np.ndarray:
        """(L,H) pattern type per the rules in PATTERN_RULES."""
        m = self.metrics
        diag = m["prev"] + m["self"] + m["next"]
        vert = m["cls"] + m["sep"] + m["punct"]
        out = np.full(diag.shape, "heterogeneous", dtype=object)
        out[m["local"] >= 0.6] = "block"
        out[(diag >= 0.25) & (vert >= 0.25) & (diag + vert >= 0.6)] = "vertical+diagonal"
        out[vert >= 0.5] = "vertical"
        out[diag >= 0.5] = "diagonal"
        return out

    def labels(self, extra: dict[tuple[int, int], str] | None = None, first: str = "[CLS]",
               probed: dict[tuple[int, int], str] | None = None) -> np.ndarray:
        """(L,H) one role per head: `probed` labels first (measured on their own probe, e.g. induction on
        repeated random tokens), then the first that fires of previous/self/next (≥ 0.5), [SEP]/[CLS]/punctuation
        (≥ 0.6), broad (≥ 0.9), then `extra` (syntactic, coreference), else other. `first` names the first
        token's role: "[CLS]", or "first token" (a decoder's sink)."""
        m = self.metrics
        out = np.full(m["cls"].shape, "other", dtype=object)
        rules = [("broad", m["entropy"] >= BROAD_MIN), ("punctuation", m["punct"] >= SPECIAL_MIN),
                 (first, m["cls"] >= SPECIAL_MIN), ("[SEP]", m["sep"] >= SPECIAL_MIN),
                 ("next", m["next"] >= POSITIONAL_MIN), ("self", m["self"] >= POSITIONAL_MIN),
                 ("previous", m["prev"] >= POSITIONAL_MIN)]
        for (layer, head), label in (extra or {}).items():
            out[layer, head] = label
        for label, fires in rules:  # later rules win: positional labels take precedence
            out[fires] = label
        for (layer, head), label in (probed or {}).items():
            out[layer, head] = label
        return out


def head_roles(result: object, texts: Sequence[int] | None = None) -> HeadRoles:
    """Roles from an AttentionResult (all its texts, or the chosen indices)."""
    acc = RoleAccumulator()
    for b in texts if texts is not None else range(len(result.tokens)):
        special = [w is None for w in result.word_ids[b]]
        acc.add(result.text_attention(b), result.labels[b], special, causal=result.causal)
    return acc.result()


class LabelledHeads(Protocol):
    def head_labels(self) -> dict[tuple[int, int], str]: ...


def role_labels(roles: HeadRoles, causal: bool, found: Sequence[LabelledHeads | None] = (),
                probed: LabelledHeads | None = None) -> np.ndarray:
    """(L,H) every head's role, assembled one way for every page: the pattern rules of `roles`, the labels of each
    analysis in `found` (syntax, GAP coreference; later ones win), and `probed` heads (induction) on top."""
    extra: dict[tuple[int, int], str] = {}
    for source in found:
        extra.update(source.head_labels() if source is not None else {})
    return roles.labels(extra, first_token_label(causal), probed.head_labels() if probed is not None else None)
