"""The corpus search's summary (issue 37): what the nearest pieces are — their words, parts of speech and relations —
as three bar charts side by side (one above the other on a phone: charts.for_narrow_screen keeps them readable)."""

from __future__ import annotations

from plotly.subplots import make_subplots

from mha_core.analysis.index.search import SUMMARY_FIELDS, SearchResult
from mha_core.figures import colours
from mha_core.figures.charts import safe_label
from mha_core.figures.spec import FigureDict, finished
from mha_core.i18n import tr
from mha_core.messages import N_

FIELD_TITLES = {"word": N_("Words"), "pos": N_("Parts of speech"), "deprel": N_("Relations")}


def summary_figure(result: SearchResult, stacked: bool = False) -> FigureDict:
    """One bar chart per summary the corpus has (its words always; parts of speech and relations where it is
    tagged): how many of the matches have each value, most common on top; side by side, or `stacked` one above
    the other (a phone)."""
    fields = [field for field in SUMMARY_FIELDS if result.summary(field)]
    titles = [tr(FIELD_TITLES[f]) for f in fields]
    figure = (make_subplots(rows=len(fields), cols=1, subplot_titles=titles, vertical_spacing=0.2) if stacked else
              make_subplots(rows=1, cols=len(fields), subplot_titles=titles, horizontal_spacing=0.12))
    for n, field in enumerate(fields, start=1):
        row, col = (n, 1) if stacked else (1, n)
        counts = result.summary(field)[::-1]  # plotly draws the first bar at the bottom
        figure.add_bar(x=[n for _, n in counts], y=[safe_label(value) for value, _ in counts], orientation="h",
                       marker_color=colours.ONE_SERIES, showlegend=False, row=row, col=col,
                       hovertemplate="%{y}: %{x}<extra></extra>")
        figure.update_xaxes(title_text=tr("matches"), row=row, col=col)
    figure.update_layout(height=300 * len(fields) if stacked else 360, margin={"l": 10, "r": 10, "t": 60, "b": 40},
                         title=tr("What the {n} nearest pieces are", n=len(result.matches)))
    return finished(figure)
