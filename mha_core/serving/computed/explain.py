"""What the Explanations page asks for: every method on a text for its target, with its faithfulness, once per
server and key, through the heavy-work queue (Integrated Gradients and the faithfulness runs take seconds), its
progress counted in copies of the text run."""

from __future__ import annotations

from mha_core.analysis.explain.choices import METHODS
from mha_core.analysis.explain.explain import Explanation, explain
from mha_core.engine.loading.model import LoadedModel
from mha_core.messages import N_
from mha_core.serving.computed.text import of
from mha_core.serving.server import Server, Wait
from mha_core.teaching.explain_step import AttentionBeside, attention_beside


def explanation_of(server: Server, model: LoadedModel, text: str, answer: str | None, wrong: str | None,
                   wait: Wait) -> Explanation:
    return server.queued("small", ("explanation", of(model), text, answer, wrong),
                         N_("Computing every explanation and its faithfulness (copies of the sentence run)"),
                         lambda progress: explain(model, text, answer, wrong, METHODS, progress=progress), wait)


def lesson_explanation_of(server: Server, model: LoadedModel, text: str, wait: Wait) -> AttentionBeside:
    """The lesson's step "Is attention the explanation?" on the class's sentence: the chosen head's attention beside
    input × gradient and occlusion (teaching.explain_step), once per server, model and sentence."""
    return server.queued("small", ("lesson explanation", of(model), text),
                         N_("Comparing the head's attention with input × gradient and occlusion"),
                         lambda progress: attention_beside(model, text), wait)
