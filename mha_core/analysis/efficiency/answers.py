"""What a pattern changes in a model's answer to the seeds' question, it → animal: on an encoder, the pronoun's
clearest head (which noun it prefers, dense and patterned); on a decoder, the model asked in words ("… The word 'it'
refers to the", 句中的“它”是指 for Chinese text) with the pattern and without, both answers named.

Shapes: L layers, H heads, T pieces, V vocabulary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.analysis.efficiency.fidelity import (
    PatternedRun,
    check_pattern_budget,
    check_text_model,
    chosen_layers,
    kernel_hooks,
    paths_of,
)
from mha_core.analysis.efficiency.patterns import Pattern, allowed_keys, check_fits, checked_pattern
from mha_core.engine.allowed import AllowedKeys
from mha_core.engine.forward import AUTO, forward
from mha_core.engine.hooks import hooks_of
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import TokenBatch, tokenize


@dataclass(frozen=True)
class CorefAnswer:
    """An encoder's pronoun → antecedent under a pattern: in the head whose dense preference is clearest (layer,
    head), the candidate it prefers dense (`before`) and patterned (`after`); `kept` of `total` heads prefer the same
    candidate in both runs."""

    pronoun: str
    candidates: tuple[str, str]
    layer: int
    head: int
    before: str
    after: str
    kept: int
    total: int


Asked = tuple[Sequence, int, Sequence[int]]  # the text's words, its pronoun, the two candidates (word indices)


def coref_answer(run: PatternedRun, asked: Asked | None) -> CorefAnswer | None:
    """The text's pronoun and its two candidates (`asked`: the Coreference page's, teaching.examples.compared_words;
    the seeds' it → animal, street), dense and patterned; None when the text has none (an InspectorError when a word
    lies beyond the model's cut)."""
    from mha_core.analysis.coref.sentence import antecedent_scores

    if asked is None:
        return None
    words, pronoun, candidates = asked
    dense, patterned = (antecedent_scores(r, 0, words, pronoun, candidates).scores for r in (run.dense,
                                                                                            run.patterned))  # (2,L,H)
    margin = dense[0] - dense[1]  # (L,H)
    layer, head = np.unravel_index(np.abs(margin).argmax(), margin.shape)
    names = tuple(words[i].text for i in candidates)
    return CorefAnswer(words[pronoun].text, names, int(layer), int(head), names[int(dense[:, layer, head].argmax())],
                       names[int(patterned[:, layer, head].argmax())],
                       int(((patterned[0] > patterned[1]) == (dense[0] > dense[1])).sum()), int(margin.size))


@dataclass(frozen=True)
class ProbeAnswer:
    """A decoder asked which noun the pronoun means (`probe`: the text and the question), dense and under the
    pattern: the likeliest next piece of each (`dense`, `patterned`) and each candidate's probability (by its first
    piece) in each run, `candidates`' order."""

    probe: str
    pronoun: str
    candidates: tuple[str, str]
    dense: str
    patterned: str
    dense_probs: tuple[float, float]
    patterned_probs: tuple[float, float]

    @property
    def patterned_names_one(self) -> bool:
        """Whether the patterned run's answer is a candidate's start (SmolLM2 under window:4 answered ' world', of
        which "it now prefers street over animal", both under 1 %, said nothing true)."""
        said = self.patterned.strip()
        return bool(said) and any(name.startswith(said) for name in self.candidates)

    @property
    def preferred(self) -> tuple[str, str]:
        """The candidate each run finds likelier (dense, patterned)."""
        return tuple(self.candidates[int(probs[1] > probs[0])] for probs in (self.dense_probs,
                                                                             self.patterned_probs))


def next_distribution(model: LoadedModel, batch: TokenBatch, path: str, pattern: Pattern | None,
                      layers: tuple[int, ...]) -> torch.Tensor:
    """(V,) the next piece's probabilities after `batch`'s text, dense (`pattern` None) or under `pattern`; only the
    last layer's output is kept."""
    from mha_core.analysis.lm.head import lm_logits

    if pattern is None or pattern.masked:
        allowed = None if pattern is None else AllowedKeys(
            allowed_keys(pattern, batch.input_ids.shape[1], True).to(model.device), layers)
        result = forward(model, batch, path, keep_hidden=False, allowed=allowed)
    else:
        result = forward(model, batch, path, keep_hidden=False, hooks=hooks_of(kernel_hooks(model, pattern, layers)))
    return torch.softmax(lm_logits(model, result.hidden_states[-1][0, -1]).double(), -1)


@torch.inference_mode()
def probe_answer(model: LoadedModel, text: str, asked: Asked | None, pattern: str | Pattern,
                 layers: Sequence[int] | None = None, path: str = AUTO) -> ProbeAnswer | None:
    """A decoder's answer to the question about the text's pronoun, between its two candidates (`asked`: the
    Coreference page's, teaching.examples.compared_words), dense and under `pattern` (one run at a time); None for an
    encoder, a model without a next-piece head, or a text without such a pronoun."""
    from mha_core.analysis.coref.sentence import with_probe
    from mha_core.analysis.lm.head import predicts_next
    from mha_core.analysis.lm.predict import first_piece_id

    check_text_model(model)
    pattern, chosen = checked_pattern(pattern), chosen_layers(model, layers)
    if asked is None or not (model.arch.causal and predicts_next(model)):
        return None
    words, pronoun, candidates = asked
    probe = with_probe(text, words[pronoun])
    batch = tokenize(model.tokenizer, probe, model.max_length, bos=model.bos_id)
    n = batch.input_ids.shape[1]
    check_fits(pattern, n)
    check_pattern_budget(model, pattern, n, path)
    dense_path, patterned_path = paths_of(model, pattern, n, path)
    runs = [next_distribution(model, batch, dense_path, None, chosen),
            next_distribution(model, batch, patterned_path, pattern, chosen)]
    names = tuple(words[i].text for i in candidates)
    firsts = [first_piece_id(model, name) for name in names]
    said = [model.tokenizer.decode([int(probs.argmax())]) for probs in runs]
    return ProbeAnswer(probe, words[pronoun].text, names, said[0], said[1],
                       *(tuple(float(probs[first]) for first in firsts) for probs in runs))
