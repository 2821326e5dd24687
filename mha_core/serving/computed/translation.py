"""What the Translation page asks for, each by name (as serving.computed.text): a model's alignment heads and its
both-ways methods (shipped for the bundled models, else chosen on the development half through the heavy-work
queue), a translation, a forced alignment by any method, and the methods' measured table."""

from __future__ import annotations

from mha_core.analysis.translation.chosen import MeasuredTable, known_choices, measured_table, method_choices
from mha_core.analysis.translation.heads import HeadChoice, head_choice, known_choice
from mha_core.analysis.translation.methods import MethodChoices
from mha_core.analysis.translation.translate import Translation, align, translate
from mha_core.engine.loading.bundled import GEMMA_NAME
from mha_core.engine.loading.model import LoadedModel
from mha_core.messages import N_
from mha_core.serving.computed.text import of
from mha_core.serving.server import Server, Wait

__all__ = ["GEMMA_NAME", "forced_alignment_of", "head_choice_of", "known_method_choices", "method_choices_of",
           "methods_table_of", "translation_of"]  # GEMMA_NAME: the page's model


def head_choice_of(server: Server, model: LoadedModel, source_language: str, target_language: str,
                   wait: Wait) -> HeadChoice:
    """Shipped (or already made) at once; another model's is made on the 75 development pairs, once a server, with
    progress."""
    known = known_choice(model, f"{source_language}-{target_language}")
    if known is not None:
        return known
    return server.queued("small", ("alignment heads", of(model), source_language, target_language),
                         N_("Choosing the alignment heads on the hand-aligned pairs"),
                         lambda progress: head_choice(model, source_language, target_language, progress), wait)


def method_choices_of(server: Server, model: LoadedModel, wait: Wait) -> MethodChoices:
    """The both-ways methods' settings: shipped at once; another model's made on the development pairs read both
    ways, once a server, with progress (align() then finds them made)."""
    known = known_choices(model)
    if known is not None:
        return known
    return server.queued("small", ("alignment methods", of(model)),
                         N_("Choosing the alignment methods on the hand-aligned pairs"),
                         lambda progress: method_choices(model, progress), wait)


def known_method_choices(model: LoadedModel) -> MethodChoices | None:
    """The both-ways settings if made or shipped, without making them."""
    return known_choices(model)


def translation_of(server: Server, model: LoadedModel, text: str, source_language: str,
                   target_language: str) -> Translation:
    return server.in_slot("small", ("translate", of(model), text, source_language, target_language),
                          lambda: translate(model, text, source_language, target_language))


def forced_alignment_of(server: Server, model: LoadedModel, source: str, target: str, source_language: str,
                        target_language: str, method: str = "heads") -> Translation:
    """Forced alignment by `method` (a both-ways one after method_choices_of has them)."""
    return server.in_slot("small", ("align", of(model), source, target, source_language, target_language, method),
                          lambda: align(model, source, target, source_language, target_language, method=method))


def methods_table_of(model: LoadedModel) -> MeasuredTable | None:
    """The measured table shipped for the bundled model (benchmarks/bench_align.py), None for another."""
    return measured_table(model)
