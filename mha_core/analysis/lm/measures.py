"""What an intervention is measured by, read off variants' final states and last-layer maps (ablation.py and
patching.py share them):
- "embedding": 1 - cos between the variant's and the original's sentence embedding (mean over tokens,
  L2-normalised, as sentence-transformers pools all-MiniLM-L6-v2);
- "loss": mean next-token loss; "target": a target's summed log-probability after a position (language-model head);
- "coref": the coreference margin (pronoun -> first candidate minus second) in the last-layer head where the
  unchanged model's margin is largest.

Shapes: n variants, T tokens, D d_model, H heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.analysis.coref.sentence import Word
from mha_core.analysis.lm.choices import MEASURE_HELP, MEASURES  # noqa: F401 -- named without torch
from mha_core.analysis.lm.head import check_lm_head, lm_logits, predicts_next
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch
from mha_core.messages import N_


def measures_for(model: LoadedModel) -> tuple[str, ...]:
    """The measures this model can be scored by: loss and target need a language-model head; the sentence
    embedding (mean-pooled last layer) and the coreference margin any model."""
    return tuple(m for m in MEASURES if m not in ("loss", "target") or predicts_next(model))


def default_measure(model: LoadedModel) -> str:
    return "loss" if predicts_next(model) else "embedding"


def sentence_embedding(states: Tensor) -> Tensor:
    """(N,T,D) -> (N,D): mean over tokens, L2-normalised (as sentence-transformers pools all-MiniLM-L6-v2)."""
    return F.normalize(states.mean(dim=1), dim=-1)


@dataclass(frozen=True)
class CorefProbe:
    """Where the coreference margin is read: the pronoun's and two candidates' pieces, the best last-layer head."""

    pronoun: list[int]
    a: list[int]
    b: list[int]
    head: int
    words: tuple[str, str, str]  # pronoun, candidate a, candidate b


def coref_probe(batch: TokenBatch, last_maps: Tensor, chosen: Sequence[Word] | None = None) -> CorefProbe:
    """Where the margin is read: `chosen` (pronoun, candidate a, candidate b), else the first pronoun with two nouns
    before it (spaCy), as the Coreference page picks them; the head is the last-layer head of the largest margin."""
    from mha_core.analysis.coref.gap import candidate_scores, span_pieces
    from mha_core.analysis.coref.sentence import candidates_before, default_pronoun, sentence_words

    if chosen is None:
        words = sentence_words(batch.texts[0])
        pronoun = default_pronoun(words)
        candidates = candidates_before(words, pronoun) if pronoun is not None else []
        if len(candidates) < 2:
            raise InputError("coref_needs_pronoun", N_("The coreference measure needs a pronoun with two nouns "
                                                             "before it in the text."))
        chosen = [words[i] for i in (pronoun, *candidates[:2])]
    offsets = batch.offsets[0]
    spans = [span_pieces(offsets, word.start, len(word.text)) for word in chosen]
    if not all(spans):
        raise InputError(
            "coref_word_beyond_cut", N_("The pronoun or a candidate lies beyond the model's maximum length.")
        )
    margin = candidate_scores(last_maps[None, 0], spans[0], spans[1]) - candidate_scores(
        last_maps[None, 0], spans[0], spans[2]
    )  # (1,H)
    head = int(margin[0].abs().argmax())
    return CorefProbe(*spans, head, tuple(word.text for word in chosen))


def coref_margins(maps: Tensor, probe: CorefProbe) -> Tensor:
    """(N,H,T,T) last-layer maps -> (N,) margin a - b of the probe's head."""
    rows = maps[:, probe.head][:, probe.pronoun]  # (N,P,T)
    return rows[..., probe.a].sum(-1).mean(-1) - rows[..., probe.b].sum(-1).mean(-1)


@dataclass(frozen=True)
class Scorer:
    """A measure read off variants' final states (n,T,D) and last-layer maps (n,H,T,T): (n,) values. Logits
    are computed only where the measure reads them, in position blocks within `free_bytes`."""

    model: LoadedModel
    measure: str
    ids: Tensor  # (T,) the text's ids
    scored: tuple[tuple[int, int], ...]  # target: (position, token) pairs whose log-probabilities are summed
    probe: CorefProbe | None
    free_bytes: int

    def values(self, states: Tensor, last_maps: Tensor, base: Tensor | None) -> Tensor:
        """Embedding: the original's embedding (base None) or 1 - cos to it; else the measure itself."""
        if self.measure == "embedding":
            embedding = sentence_embedding(states)  # (n,D)
            return embedding if base is None else 1 - embedding @ base[0]
        if self.measure == "coref":
            return coref_margins(last_maps, self.probe)
        if self.measure == "loss":
            return self.next_token_loss(states)
        return sum(
            torch.log_softmax(lm_logits(self.model, states[:, p]).float(), dim=-1)[:, token] for p, token in self.scored
        )

    def next_token_loss(self, states: Tensor) -> Tensor:
        """Mean next-token cross-entropy (n,) over the text's positions (lm_head: the vocabulary in slices)."""
        n, t = states.shape[:2]
        if t < 2:
            return torch.zeros(n)
        targets = self.ids[1:t].repeat(n)  # (n(T-1),) the next tokens, variant after variant
        rows = states[:, : t - 1].reshape(n * (t - 1), -1)  # (n(T-1),D)
        losses = check_lm_head(self.model).cross_entropy(rows, targets, self.free_bytes)  # (n(T-1),)
        return losses.view(n, t - 1).mean(-1)
