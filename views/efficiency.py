"""Efficiency (issue 48): what a sparse or linear stand-in for attention changes in this model, and what each kernel
costs on this server. Computed in mha_core.analysis.efficiency; the pattern's words in mha_core.teaching.efficiency."""

from __future__ import annotations

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.coref.sentence import InspectorError
from mha_core.analysis.efficiency.fidelity import PatternedRun
from mha_core.figures import charts, colours
from mha_core.figures import efficiency as figures
from mha_core.i18n import tr, worded
from mha_core.serving.computed import efficiency as computed
from mha_core.teaching.efficiency import KINDS, NUMBERS, TRADES, share, slope_note, spec_of
from views._inputs import sentence_box
from views._state import answered, chart, current_model, queued
from views._text import literal
from views._visit import choose, chosen, page_link, stop, widget


def pattern_picker(model: LoadedModel) -> tuple[str, str, tuple[int, ...] | None]:
    """The pattern's kind, its spec ('window:4') and the layers it applies to (None: every layer)."""
    kind_column, *number_columns = st.columns([2, 1, 1, 1, 1])
    kind = widget(kind_column.selectbox, "eff_kind", "window", tr("Pattern"), options=list(KINDS),
                  format_func=lambda k: tr(KINDS[k]))
    numbers = {}
    for column, (name, (label, default)) in zip(number_columns, NUMBERS.get(kind, {}).items(), strict=False):
        numbers[name] = widget(column.number_input, f"eff_{name}", default, tr(label), min_value=0 if name == "seed"
                               else 1, max_value=4096, step=1, context=(kind,))
    layers = widget(st.multiselect, "eff_layers", [], tr("Layers it applies to (none chosen: every layer)"),
                    options=list(range(model.n_layers)), format_func=lambda layer: f"L{layer}",
                    placeholder=tr("every layer"))
    return kind, spec_of(kind, numbers), tuple(layers) or None


def coref_view(model: LoadedModel, run: PatternedRun, text: str) -> None:
    """An encoder's it → animal: does the pronoun's clearest head keep its noun under the pattern?"""
    try:
        answer = computed.coref_of(run, text, model.name)
    except InspectorError as err:
        st.info(literal(worded(err)))
        return
    if answer is None:
        st.caption(tr("With a pronoun and two nouns before it (the seeds' it → animal), this says whether the "
                      "pronoun's strongest head still picks the same noun."))
        return
    verdict = tr("survives") if answer.before == answer.after else tr("is lost")
    st.markdown(tr("**{pronoun} → {before}** in L{layer} H{head} (the clearest head) {verdict} under the pattern: it "
                   "now prefers **{after}**. {kept} of {total} heads keep their preference.",
                   pronoun=literal(answer.pronoun), before=literal(answer.before), layer=answer.layer,
                   head=answer.head, verdict=verdict, after=literal(answer.after), kept=answer.kept,
                   total=answer.total))


def next_piece_view(model: LoadedModel, run: PatternedRun, text: str, layers: tuple[int, ...] | None) -> None:
    """A decoder: the next piece after the text dense and patterned, both named, and the model asked in words which
    noun the pronoun means, with the pattern and without."""
    kl, agrees = st.columns(2)
    kl.metric(tr("KL(dense ‖ patterned) of the next piece"), f"{run.next_kl:.3f}")
    dense, patterned = (repr(piece) for piece in run.next_pieces)
    agrees.metric(tr("Most likely next piece"), tr("{piece} in both runs", piece=dense) if run.top1_agrees else
                  tr("{dense} dense, {patterned} patterned", dense=dense, patterned=patterned))
    probe = answered(computed.probe_of, model, text, run.pattern.spec, layers)
    if probe is None:
        st.caption(tr("With a pronoun and two nouns before it (the seeds' it → animal), the model is asked which noun "
                      "it means, with the pattern and without."))
        return
    first, second = (literal(name) for name in probe.candidates)
    st.markdown(tr("Asked “{probe}”, the model answers **{dense}** dense ({first} {d1}, {second} {d2}) and "
                   "**{patterned}** under the pattern ({first} {p1}, {second} {p2}): it {verdict}.",
                   probe=literal(probe.probe), dense=literal(repr(probe.dense)),
                   patterned=literal(repr(probe.patterned)), first=first, second=second,
                   d1=share(probe.dense_probs[0]), d2=share(probe.dense_probs[1]),
                   p1=share(probe.patterned_probs[0]), p2=share(probe.patterned_probs[1]),
                   verdict=tr("no longer answers with either noun") if not probe.patterned_names_one else
                   tr("still prefers {noun}", noun=literal(probe.preferred[1]))
                   if probe.preferred[0] == probe.preferred[1] else
                   tr("now prefers {after} over {before}", after=literal(probe.preferred[1]),
                      before=literal(probe.preferred[0]))))


def fidelity(model: LoadedModel, run: PatternedRun, text: str, key: tuple) -> None:
    left, right = st.columns(2)
    with left:
        if run.allowed is not None:
            chart(("eff pattern", *key), lambda: figures.pattern_figure(run.allowed, run.tokens, run.pattern.spec),
                  key="eff_pattern")
        else:
            st.markdown(tr("A kernel sees every key: it replaces the softmax's weights by φ(q)·φ(k), normalised. "
                           "The grid shows how much of each head's map it reproduces (Σ min(dense, kernel))."))
    with right:
        chart(("eff kept", *key), lambda: figures.kept_mass_figure(run.kept_mass, run.pattern.spec), key="eff_kept")
    chart(("eff change", *key), lambda: figures.layer_change_figure(run.layer_change), key="eff_change")
    if run.next_kl is not None:
        next_piece_view(model, run, text, key[3])
    elif not model.arch.causal:
        coref_view(model, run, text)
    one_head(model, run, key)


def one_head(model: LoadedModel, run: PatternedRun, key: tuple) -> None:
    st.subheader(tr("One head, dense beside patterned"))
    worst = run.most_changed_head
    left, right = st.columns(2)
    layer = widget(left.selectbox, "eff_layer", worst[0], tr("Layer"), options=list(range(model.n_layers)))
    head = widget(right.selectbox, "eff_head", worst[1], tr("Head"), options=list(range(model.n_heads)))
    for column, result, name in ((left, run.dense, tr("dense")), (right, run.patterned, run.pattern.spec)):
        with column:
            chart(("eff head", *key, name, layer, head), lambda result=result, name=name: charts.matrix_spec(
                result.text_layer_maps(0, layer)[head].numpy(), list(run.tokens),
                tr("L{layer} H{head}, {name}", layer=layer, head=head, name=name), height=380,
                cols=charts.indexed_labels(run.tokens), colorscale=colours.WEIGHTS, zmid=None))


def cost_section(model: LoadedModel) -> None:
    st.subheader(tr("The cost, measured on this server"))
    st.caption(tr("One layer's attention of {name} ({heads} heads of {head_dim}) at {shortest:,} to {longest:,} pieces,"
                  " by four kernels: the explicit softmax that stores the n × n weights, the fused kernel (SDPA) that "
                  "never stores them, a window computed band by band (O(n·W)) and linear attention (O(n·d²)). Measured "
                  "once per server, in the heavy-work queue: first each kernel is timed at each length, then each "
                  "kernel's peak memory is measured in a process of its own (the last {kernels} steps of the bar, a few"
                  " seconds each).",
                  name=model.name, heads=model.n_heads, head_dim=model.head_dim, shortest=computed.BENCH_LENGTHS[0],
                  longest=computed.BENCH_LENGTHS[-1], kernels=len(computed.KERNELS)))
    if not chosen("eff_measure", False):
        st.button(tr("Measure on this server"), on_click=choose, args=("eff_measure", True), icon=":material/timer:")
        return
    cost = queued(computed.cost_of, model)
    if cost is None:
        return
    left, right = st.columns(2)
    with left:
        chart(("eff cost", cost.heads, cost.head_dim, cost.lengths), lambda: figures.cost_figure(cost, False),
              key="eff_cost")
    with right:
        chart(("eff memory", cost.heads, cost.head_dim, cost.lengths), lambda: figures.cost_figure(cost, True),
              key="eff_memory")
    cross = cost.crossing("fused", "window")
    st.markdown(tr("Slopes of time against length (log–log): {slopes}. 2 is quadratic, 1 linear.",
                   slopes=", ".join(f"{k} {v:.2f}" for k, v in cost.slopes.items())) + " " + worded(slope_note(cost))
                + " " + (
        tr("The window kernel overtakes the fused one at about {n:,.0f} pieces.", n=cross) if cross else
        tr("Within these lengths the window kernel does not overtake the fused one.")))


def main() -> None:
    st.title(tr("Efficiency: the cost of attention, and what cheaper attention changes"))
    st.caption(tr("Every word attends to every word: O(n²) time and memory. Sparse patterns (a window, Longformer's "
                  "global pieces, BigBird's random keys) and linear attention cut the square; the question is what "
                  "they change in a model trained with full attention."))
    page_link("views/parameters.py", label=tr("The formulas: FLOPs, memory and the KV cache on the Parameters page"),
              icon=":material/calculate:", query_params={"ptab": "Any shape"})  # the tab with the formulas
    model = current_model()
    text = sentence_box()
    kind, spec, layers = pattern_picker(model)
    st.info(tr(TRADES[kind]))
    run = answered(computed.patterned_of, model, text, spec, layers)
    if run is None:
        stop()
    fidelity(model, run, text, (str(model.model_dir), text, spec, layers))
    cost_section(model)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
