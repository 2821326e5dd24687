"""What the Explanations page asks for: every method on a text for its target, with its faithfulness, once per
server and key, through the heavy-work queue (Integrated Gradients and the faithfulness runs take seconds), its
progress counted in copies of the text run."""

from __future__ import annotations

from mha_core.analysis.explain.choices import METHODS
from mha_core.analysis.explain.explain import Explanation, explain
from mha_core.engine.loading.model import LoadedModel
from mha_core.i18n import N_
from mha_core.serving.computed.text import of
from mha_core.serving.server import Server, Wait


def explanation_of(server: Server, model: LoadedModel, text: str, answer: str | None, wrong: str | None,
                   wait: Wait) -> Explanation:
    return server.queued("small", ("explanation", of(model), text, answer, wrong),
                         N_("Computing every explanation and its faithfulness (copies of the sentence run)"),
                         lambda progress: explain(model, text, answer, wrong, METHODS, progress=progress), wait)
