"""What the Efficiency page asks for (as serving.computed.text): a text run dense and under a pattern (at once, in a
compute slot), and the kernels' measured cost (through the heavy-work queue with progress, kept per server)."""

from __future__ import annotations

from mha_core.analysis.efficiency.answers import CorefAnswer, ProbeAnswer, coref_answer, probe_answer
from mha_core.analysis.efficiency.cost import KERNELS, AttentionCost, attention_cost, model_shape
from mha_core.analysis.efficiency.fidelity import PatternedRun, with_pattern
from mha_core.engine.loading.model import LoadedModel
from mha_core.messages import N_
from mha_core.serving.computed.text import of
from mha_core.serving.server import Server, Wait
from mha_core.teaching.examples import compared_words

BENCH_LENGTHS = (512, 1024, 2048, 4096, 8192)  # the page's: each kernel's curve to where explicit still fits


def patterned_of(server: Server, model: LoadedModel, text: str, spec: str, layers: tuple[int, ...] | None
                 ) -> PatternedRun:
    return server.in_slot("small", ("pattern", of(model), text, spec, layers),
                          lambda: with_pattern(model, text, spec, layers))


def probe_of(server: Server, model: LoadedModel, text: str, spec: str, layers: tuple[int, ...] | None
             ) -> ProbeAnswer | None:
    """A decoder asked which noun the text's pronoun means, dense and under the pattern (None: no such question)."""
    return server.in_slot("small", ("pattern probe", of(model), text, spec, layers),
                          lambda: probe_answer(model, text, compared_words(text, model.name), spec, layers))


def coref_of(run: PatternedRun, text: str, model_name: str) -> CorefAnswer | None:
    """An encoder's pronoun → noun in its clearest head, dense and patterned (read from the run the page holds),
    between the two nouns the Coreference page compares."""
    return coref_answer(run, compared_words(text, model_name))


def cost_of(server: Server, model: LoadedModel, wait: Wait) -> AttentionCost:
    """One layer of `model` timed by every kernel at BENCH_LENGTHS (and each one's peak memory), once a server."""
    heads, head_dim = model_shape(model)
    return server.queued("small", ("attention cost", heads, head_dim, BENCH_LENGTHS),
                         N_("Timing one layer's attention by each kernel, then measuring each one's peak memory"),
                         lambda progress: attention_cost(BENCH_LENGTHS, heads, head_dim, KERNELS, progress=progress),
                         wait)
