"""Helpers for the accessibility tests in the browser (issue 82): axe-core run on a page under the WCAG 2.1 A/AA
rules, the violations that Streamlit's own widgets carry and the app cannot fix named (docs/developers/
accessibility.md says why), and contrast measured on the rendered page (text against its background, chart marks
against the chart's paper)."""

from __future__ import annotations

from axe_playwright_python.base import AXE_SCRIPT

WCAG_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
SERIOUS = ("serious", "critical")
# Streamlit's own, out of the app's reach (docs/developers/accessibility.md): rule -> the elements it is excused on.
STREAMLIT_OWN: dict[str, tuple[str, ...]] = {}

AXE_RUN = """async ([tags, serious]) => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
  return result.violations.filter(v => serious.includes(v.impact)).map(v => ({
    id: v.id, impact: v.impact, nodes: v.nodes.map(n => ({target: n.target.join(" "), html: n.html.slice(0, 200),
                                                         summary: (n.failureSummary || "").slice(0, 300)}))}));
}"""


def axe_violations(page: object) -> list[dict]:
    """The page's serious and critical violations of the WCAG 2.1 A/AA rules (axe-core injected once per document),
    those STREAMLIT_OWN excuses left out, each node as its selector, its HTML and why."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE_SCRIPT)
    found = page.evaluate(AXE_RUN, [list(WCAG_TAGS), list(SERIOUS)])
    kept = []
    for violation in found:
        excused = STREAMLIT_OWN.get(violation["id"], ())
        nodes = [n for n in violation["nodes"] if not any(part in n["target"] for part in excused)]
        if nodes:
            kept.append({**violation, "nodes": nodes})
    return kept


def said(violations: list[dict]) -> str:
    """Violations as lines a failing test prints."""
    return "\n".join(f"{v['id']} ({v['impact']}): {n['target']} {n['summary']}" for v in violations for n in v["nodes"])


CONTRAST = """() => {
  const parse = (text) => {
    const m = (text || "").match(/rgba?\\(([^)]*)\\)/);
    if (!m) return null;
    const v = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  };
  const channel = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + .05) / (y + .05);
  };
  const over = (top, under, alpha = top[3]) => [0, 1, 2].map(i => top[i] * alpha + under[i] * (1 - alpha));
  const backdrop = (element) => {
    const layers = [];
    for (let e = element; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    return layers.reverse().reduce((under, c) => over(c, under), [255, 255, 255]);
  };
  const shown = (e) => { const s = getComputedStyle(e), r = e.getBoundingClientRect();
    return s.visibility !== "hidden" && s.display !== "none" && +s.opacity > 0 && parseFloat(s.fontSize) > 0
      && r.width > 0 && r.height > 0; };
  const main = document.querySelector("[data-testid='stMain']");
  const texts = [], marks = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    const e = node.parentElement;
    if (!node.textContent.trim() || !e || e.closest("svg, [disabled], [aria-disabled='true']") || !shown(e)) continue;
    const under = backdrop(e), colour = parse(getComputedStyle(e).color);
    let faded = colour[3];  // a caption's container is drawn at 0.6 opacity: its text is that much paler
    for (let a = e; a && a !== main.parentElement; a = a.parentElement) faded *= +getComputedStyle(a).opacity;
    texts.push([node.textContent.trim().slice(0, 40), ratio(over(colour, under, faded), under)]);
  }
  for (const plot of main.querySelectorAll(".js-plotly-plot")) {
    const paper = over(parse(plot._fullLayout.paper_bgcolor) || [255, 255, 255, 0], backdrop(plot));
    const bg = over(parse(plot._fullLayout.plot_bgcolor) || [255, 255, 255, 0], paper);
    for (const t of plot.querySelectorAll("svg text")) {
      const s = getComputedStyle(t), fill = parse(s.fill);
      if (!t.textContent.trim() || !fill || t.closest(".hm, .heatmaplayer, .hoverlayer") || !shown(t)) continue;
      const seen = over(fill, paper, fill[3] * +s.fillOpacity * +s.opacity);
      texts.push([t.textContent.trim().slice(0, 40), ratio(seen, paper)]);
    }
    const drawn = plot.querySelectorAll(
      ".barlayer .point path, .scatterlayer .js-line, .scatterlayer .point, .shapelayer path");
    for (const m of drawn) {
      const s = getComputedStyle(m), trace = m.closest(".trace, .shape-group") || m;
      const stroked = m.classList.contains("js-line") || m.closest(".shapelayer");
      const paint = parse(stroked ? s.stroke : s.fill);
      const opacity = +(stroked ? s.strokeOpacity : s.fillOpacity) * +s.opacity * +getComputedStyle(trace).opacity;
      const alpha = paint ? paint[3] * opacity : 0;
      if (!paint || alpha < 0.05) continue;  // the overview's clear click targets: nothing drawn
      marks.push([m.getAttribute("class") || m.tagName, ratio(over(paint, bg, alpha), bg)]);
    }
    for (const trace of plot._fullData.filter(t => t.colorscale && t.visible !== false)) {
      const ends = trace.colorscale.map(stop => parse(stop[1].startsWith("#") ? hex(stop[1]) : stop[1]))
        .filter(c => c && c[3] > 0);
      for (const end of [ends[0], ends[ends.length - 1]]) marks.push(["colour scale end", ratio(over(end, bg), bg)]);
    }
  }
  function hex(h) { return `rgb(${[1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16)).join(",")})`; }
  return {texts, marks};
}"""


def contrasts(page: object) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(text, contrast) for every text shown in the page's main area (Plotly's included; a heatmap's cell labels,
    which plotly colours against their own cell, and disabled controls left out), and (mark, contrast) for every
    chart mark drawn (bars, lines, markers, shapes; a colour scale's two ends) against the chart's paper."""
    measured = page.evaluate(CONTRAST)
    return [tuple(t) for t in measured["texts"]], [tuple(m) for m in measured["marks"]]
