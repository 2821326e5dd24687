"""Each result's figure and table in a notebook (registered with engine.drawable when this module loads): the figures
the app's pages draw, from the same builders, as plotly Figures that Jupyter shows inline; tables as HTML where a
result has one.
The titles are in the running language (English unless mha_core.i18n.use("zh") was called)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.analysis.coref.gap import CorefResult
from mha_core.analysis.corpus.syntax import SyntaxResult
from mha_core.analysis.heads.pairs import PairShares
from mha_core.analysis.heads.roles import HeadRoles, head_label, role_labels
from mha_core.analysis.index.search import SearchResult
from mha_core.analysis.lm.ablation import AblationGrid
from mha_core.analysis.lm.generate import Generation
from mha_core.analysis.lm.patching import HEAD, HEADS, PatchGrid
from mha_core.analysis.lm.predict import Attribution, LogitLens, Prediction
from mha_core.analysis.seq2seq.transcribe import Transcript
from mha_core.analysis.translation.heads import HeadChoice
from mha_core.analysis.translation.translate import Translation
from mha_core.engine.drawable import register_drawers
from mha_core.engine.result import AttentionResult
from mha_core.engine.seq2seq.forward import Seq2SeqResult
from mha_core.figures import charts, colours
from mha_core.figures.index import summary_figure
from mha_core.figures.predict import lens_figure
from mha_core.figures.roles import role_grid_figure
from mha_core.figures.seq2seq import seq2seq_figure, transcript_figure
from mha_core.figures.translation import alignment_matrix_figure, head_aer_figure
from mha_core.i18n import tr
from mha_core.messages import N_


def attention_figure(result: AttentionResult, layer: int | None = None, head: int | None = None,
                     text: int = 0) -> dict:
    """One head's map (layer and head given) or every head at a glance (the Heads page's overview)."""
    n = result.lengths[text]
    labels = result.labels[text]
    if layer is None or head is None:
        maps = np.stack([result.text_layer_maps(text, lay).numpy() for lay in range(result.n_layers)])
        return charts.overview_figure(maps[:, :, :n, :n], title=N_("Every head at a glance"))
    z = result.text_layer_maps(text, layer)[head, :n, :n].numpy()
    return charts.head_figure(z, labels, tr("Layer {layer}, head {head}", layer=layer, head=head))


def patch_figure(grid: PatchGrid) -> dict:
    shown = tr(grid.shown_label)
    values = grid.shown[None] if grid.what == HEAD else grid.shown
    return charts.layer_head_grid(values, shown[:1].upper() + shown[1:], shown.split()[0], zmid=0,
                                  colorscale=colours.SIGNED,
                                  columns=None if grid.what == HEADS else list(grid.tokens),
                                  rows=[head_label(*grid.head)] if grid.what == HEAD else None)


FIGURES: dict[type, Callable[..., dict]] = {
    AttentionResult: attention_figure,
    Prediction: lambda p: charts.token_bar_figure(list(p.top_pieces), np.array(p.top_probs), p.title),
    LogitLens: lens_figure,
    Attribution: lambda a: charts.layer_head_grid(a.heads, N_("Each head's direct share"), "logit", zmid=0,
                                                  colorscale=colours.SIGNED),
    PatchGrid: patch_figure,
    AblationGrid: lambda g: charts.layer_head_grid(g.effects, N_("Change when the head is ablated"), g.measure,
                                                   zmid=0, colorscale=colours.SIGNED),
    HeadRoles: lambda r, causal=False: role_grid_figure(role_labels(r, causal), r, causal),
    PairShares: lambda p: charts.layer_head_grid(p.a_to_b, N_("Share of attention from segment A to segment B"),
                                                 N_("share"), zrange=(0.0, 1.0)),
    CorefResult: lambda c: charts.layer_head_grid(c.accuracy, N_("Accuracy on GAP: the head's favourite candidate"),
                                                  N_("accuracy"), zrange=(0.0, 1.0)),
    Seq2SeqResult: seq2seq_figure,
    SearchResult: summary_figure,
    Transcript: transcript_figure,
    Translation: alignment_matrix_figure,
    HeadChoice: head_aer_figure,
    SyntaxResult: lambda s, relation="all": charts.layer_head_grid(
        s.relations[relation].accuracy.max(axis=0), tr("Accuracy on {relation} (the better direction)",
                                                       relation=relation), N_("accuracy"), zrange=(0.0, 1.0)),
}


def figure_of(result: Any, **options: Any) -> go.Figure:
    """The app's figure of `result` (a result of mha_core: AttentionResult, Prediction, LogitLens, ...)."""
    build = next((build for kind, build in FIGURES.items() if isinstance(result, kind)), None)
    if build is None:
        raise TypeError(f"{type(result).__name__} has no figure; these have: "
                        + ", ".join(kind.__name__ for kind in FIGURES))
    return go.Figure(build(result, **options))


TABLES: dict[type, Callable[[Any], pd.DataFrame]] = {
    Prediction: lambda p: pd.DataFrame({"piece": p.top_pieces, "probability": p.top_probs}),
    SyntaxResult: lambda s: pd.DataFrame(s.relation_rows()).drop(columns=["accuracy"]),
    CorefResult: lambda c: pd.DataFrame([{"head": head_label(lay, h), "accuracy": acc}
                                         for lay, h, acc in c.ranking()[:10]]),
    AblationGrid: lambda g: pd.DataFrame([{"head": head_label(*lh), "effect": float(g.effects[lh])}
                                          for lh in g.strongest()]),
    Transcript: lambda t: pd.DataFrame([{"word": w.word, "start": w.start, "end": w.end} for w in t.words]),
    SearchResult: lambda r: pd.DataFrame([{"score": m.score, "context": m.marked(), "word": m.word,
                                           "pos": m.pos, "relation": m.deprel, "sentence": m.sentence}
                                          for m in r.matches]),
    Translation: lambda t: pd.DataFrame([{"word": w, "aligned to": " ".join(t.source_words[s] for s in
                                                                         t.aligned_to(j))}
                                         for j, w in enumerate(t.target_words)]),
    Generation: lambda g: pd.DataFrame([{"piece": s.piece, "probability": s.prob,
                                         "alternatives": ", ".join(p for p, _ in s.alternatives[:3])}
                                        for s in g.steps]),
}


def table_html(result: Any) -> str | None:
    """A notebook's HTML for a result with a table (None: Jupyter shows its repr)."""
    build = next((build for kind, build in TABLES.items() if isinstance(result, kind)), None)
    return None if build is None else build(result).to_html(index=False)


register_drawers(figure_of, table_html)  # every Drawable result's figure() and _repr_html_ from now on
