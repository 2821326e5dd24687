"""Sparse and linear stand-ins for full attention, as the efficiency literature proposes them, written as what each
query sees (a mask over the keys) or as the map a kernel gives instead of the softmax:

- `dense`: every key (the model as trained);
- `window:W`: key j iff |i - j| <= W (every piece, the specials too; a decoder also only j <= i);
- `dilated:W:D`: every D-th key within D·W of the query (|i - j| <= D·W and (i - j) divisible by D);
- `longformer:W:G`: a window plus the first G pieces global: they see, and are seen by, every piece
  (Beltagy et al. 2020);
- `bigbird:W:G:R:SEED`: Longformer's window and globals plus R keys drawn at random for each query, seeded
  (Zaheer et al. 2020);
- `linear:elu`: softmax(q·k) replaced by φ(q)·φ(k) / Σ φ(q)·φ(k), φ = elu + 1 (Katharopoulos et al. 2020);
- `performer:M:SEED`: φ(x) = exp(w·x - |x|²/2) / √M with M Gaussian w's drawn with SEED, positive random features
  whose dot product is exp(q·k) in expectation (Choromanski et al. 2021, FAVOR+ without the orthogonal draw).

The kernels read each head's queries and keys scaled by √scale each, so that φ(q)·φ(k) estimates
exp(scale · q·k), the softmax's own numerator. Shapes: T queries, S keys (S = T), H heads, Dh head width,
M random features."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.analysis.efficiency.choices import SPEC_HELP  # noqa: F401 -- named without torch
from mha_core.engine.tokens import InputError
from mha_core.i18n import Worded
from mha_core.messages import N_

MASKED = ("dense", "window", "dilated", "longformer", "bigbird")
KERNELS = ("linear", "performer")
ARITY = {"dense": 0, "window": 1, "dilated": 2, "longformer": 2, "bigbird": 4, "linear": 1, "performer": 2}
MAX_FEATURES = 4096  # performer's M: beyond this the estimate no longer improves enough to be worth its memory


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern: its kind and numbers (unused ones 0). `spec` is the text it was read from."""

    spec: str
    kind: str
    window: int = 0
    dilation: int = 1
    globals_: int = 0
    random: int = 0
    seed: int = 0
    features: int = 0

    @property
    def masked(self) -> bool:
        return self.kind in MASKED


def bad_pattern(spec: str, why: str, **values: object) -> InputError:
    """One sentence: the pattern, what is wrong with it (`why` worded with `values`), and the patterns there are."""
    return InputError("pattern_unreadable", N_("The pattern '{spec}' cannot be read: {why} (patterns: {patterns})."),
                      spec=spec, why=Worded(why, **values), patterns=Worded(SPEC_HELP))


MAX_NUMBER = 1_000_000  # W, D, G and R: far past any model's length (a text is refused later when they do not fit it)
MAX_SEED = 2**32 - 1
DIGITS = re.compile(r"[0-9]{1,20}")  # ASCII digits only (str.isdigit() accepts ², int() accepts ４)


def whole(spec: str, text: str, name: str, least: int, most: int) -> int:
    """`text` read as a whole number from `least` to `most`, or one sentence saying why not."""
    if not DIGITS.fullmatch(text) and not (text.startswith("-") and DIGITS.fullmatch(text[1:])):
        raise bad_pattern(spec, N_("{name} must be a whole number"), name=name)
    value = int(text)
    if not least <= value <= most:
        raise bad_pattern(spec, N_("{name} must be a whole number from {least:,} to {most:,}"), name=name,
                          least=least, most=most)
    return value


def positive(spec: str, text: str, name: str, most: int = MAX_NUMBER) -> int:
    return whole(spec, text, name, 1, most)


def seed_of(spec: str, text: str) -> int:
    return whole(spec, text, Worded(N_("the seed")), 0, MAX_SEED)


NAMES = {"window": ("W",), "dilated": ("W", "D"), "longformer": ("W", "G"), "bigbird": ("W", "G", "R")}


def parse_pattern(spec: str) -> Pattern:
    """'window:8' -> Pattern(kind='window', window=8); anything else that does not parse is one sentence. Every
    number is read strictly (ASCII digits) and bounded here, before any work."""
    if not isinstance(spec, str):
        raise bad_pattern(str(spec)[:40], N_("a pattern is written as text"))
    if len(spec) > 200:
        raise bad_pattern(spec[:40] + "…", N_("a pattern is a few words long"))
    kind, *parts = [part.strip() for part in spec.strip().lower().split(":")]
    if kind not in ARITY:
        raise bad_pattern(spec, N_("'{kind}' is not a pattern"), kind=kind)
    if len(parts) != ARITY[kind]:
        raise bad_pattern(spec, N_("{kind} takes {n} number(s) after it"), kind=kind, n=ARITY[kind])
    if kind == "linear":
        if parts != ["elu"]:
            raise bad_pattern(spec, N_("linear attention's feature map here is elu (linear:elu)"))
        return Pattern(spec, kind)
    if kind == "performer":
        return Pattern(spec, kind, features=positive(spec, parts[0], "M", MAX_FEATURES), seed=seed_of(spec, parts[1]))
    numbers = [positive(spec, text, name) for text, name in zip(parts, NAMES.get(kind, ()), strict=False)]
    seed = seed_of(spec, parts[3]) if kind == "bigbird" else 0
    fields = dict(zip(("window", "dilation" if kind == "dilated" else "globals_", "random"), numbers, strict=False))
    return Pattern(spec, kind, seed=seed, **fields)


def spec_of_pattern(pattern: Pattern) -> str:
    """The spec a Pattern's own fields say ('window:4'), whatever its `spec` text claims."""
    numbers = {"dense": (), "window": (pattern.window,), "dilated": (pattern.window, pattern.dilation),
               "longformer": (pattern.window, pattern.globals_),
               "bigbird": (pattern.window, pattern.globals_, pattern.random, pattern.seed),
               "linear": ("elu",), "performer": (pattern.features, pattern.seed)}[pattern.kind]
    return ":".join(str(part) for part in (pattern.kind, *numbers))


def checked_pattern(pattern: object) -> Pattern:
    """A spec parsed, or a Pattern built by hand checked by the same rules (its kind, each number's bounds)."""
    if isinstance(pattern, str):
        return parse_pattern(pattern)
    if not isinstance(pattern, Pattern):
        raise bad_pattern(repr(pattern)[:40], N_("a pattern is a spec such as window:4, or a Pattern"))
    if pattern.kind not in ARITY:
        raise bad_pattern(str(pattern.spec)[:40], N_("'{kind}' is not a pattern"), kind=str(pattern.kind)[:40])
    fields = (pattern.window, pattern.dilation, pattern.globals_, pattern.random, pattern.seed, pattern.features)
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in fields):
        raise bad_pattern(str(pattern.spec)[:40], N_("its numbers must be whole numbers"))
    parse_pattern(spec_of_pattern(pattern))  # each number the kind uses, bounded as a spec's
    return pattern


def check_fits(pattern: Pattern, n_tokens: int) -> None:
    """W, G and R must fit the text (a window as wide as the text is the dense model under another name)."""
    for name, value in (("W", pattern.window), ("G", pattern.globals_), ("R", pattern.random)):
        if value > n_tokens:
            raise InputError("pattern_wider_than_text", N_("{name} = {value} in '{spec}' is larger than the text's "
                                                           "{n} pieces: use a smaller {name}."),
                             name=name, value=value, spec=pattern.spec, n=n_tokens)


def allowed_keys(pattern: Pattern, n: int, causal: bool) -> Tensor:
    """(T,T) bool: True where query i sees key j under a masked pattern (dense: every key the model sees)."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    distance = i - j
    if pattern.kind == "dense":
        seen = torch.ones(n, n, dtype=torch.bool)
    elif pattern.kind == "dilated":
        d = pattern.dilation
        seen = (distance.abs() <= pattern.window * d) & (distance % d == 0)
    else:
        seen = distance.abs() <= pattern.window
    if pattern.globals_:
        seen = seen | (i < pattern.globals_) | (j < pattern.globals_)
    if pattern.random:
        seen = seen | random_keys(n, pattern.random, pattern.seed, causal)
    return seen & (distance >= 0) if causal else seen


def random_keys(n: int, per_query: int, seed: int, causal: bool) -> Tensor:
    """(T,T) bool: `per_query` keys drawn for each query without repeats (a decoder's among the keys it may see)."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(n, n, generator=generator)  # (T,T) a random order of the keys for each query
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -1.0)
    picked = scores.topk(min(per_query, n), dim=-1).indices  # (T,R)
    chosen = torch.zeros(n, n, dtype=torch.bool).scatter_(1, picked, True)
    return chosen & torch.ones(n, n, dtype=torch.bool).tril() if causal else chosen


def features(pattern: Pattern, x: Tensor, draws: Tensor | None) -> Tensor:
    """(…,T,Dh) scaled queries or keys -> (…,T,F) positive features."""
    if pattern.kind == "linear":
        return F.elu(x) + 1.0
    projected = x @ draws.T  # (…,T,M)
    return torch.exp(projected - (x * x).sum(-1, keepdim=True) / 2) / draws.shape[0] ** 0.5


def feature_draws(pattern: Pattern, head_dim: int) -> Tensor | None:
    """Performer's M Gaussian directions (M,Dh), seeded; None for linear:elu."""
    if pattern.kind != "performer":
        return None
    generator = torch.Generator().manual_seed(pattern.seed)
    return torch.randn(pattern.features, head_dim, generator=generator, dtype=torch.float64)


def kernel_map(pattern: Pattern, q: Tensor, k: Tensor, scale: float, causal: bool) -> Tensor:
    """q (B,H,T,Dh), k (B,H,S,Dh) -> (B,H,T,S) the map a kernel gives instead of softmax: rows φ(q_i)·φ(k_j)
    normalised to sum 1 (a decoder's over j <= i). Computed in float64 (exp of large dot products)."""
    root = scale ** 0.5
    draws = feature_draws(pattern, q.shape[-1])
    fq, fk = (features(pattern, t.double() * root, draws) for t in (q, k))  # (B,H,T,F), (B,H,S,F)
    if pattern.kind == "performer":  # a common factor per row of queries and per head of keys cancels out
        fq, fk = fq / fq.amax(-1, keepdim=True), fk / fk.amax((-2, -1), keepdim=True)
    weights = fq @ fk.transpose(-1, -2)  # (B,H,T,S)
    if causal:
        weights = weights.tril()
    return (weights / weights.sum(-1, keepdim=True)).to(q.dtype)
