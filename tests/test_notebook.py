"""Issue 34: the public API as a notebook user meets it. examples/tour.ipynb runs top to bottom in a fresh kernel
(nbclient; a cell that raises fails the test), and its results draw themselves as the app's plotly figures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.long
def test_the_tour_notebook_runs_and_every_result_draws_itself():
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "examples" / "tour.ipynb", as_version=4)
    kernel = notebook.metadata.kernelspec.name
    assert kernel == "mha-explorer"  # the venv's kernel that make install registers, with mha_core installed
    folder = str(ROOT / "examples")  # where it sits: the checkout is not on the kernel's path
    NotebookClient(notebook, timeout=300, kernel_name=kernel, resources={"metadata": {"path": folder}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    figures = [output for output in outputs if "application/vnd.plotly.v1+json" in output.get("data", {})]
    tables = [output for output in outputs if "text/html" in output.get("data", {})]
    assert len(figures) == 4 and tables  # a head, the lens, the attribution, the grid; the prediction's table


@pytest.mark.slow
def test_the_installed_package_imports_anywhere_and_its_program_is_the_cli(tmp_path):
    """make install puts mha_core in the venv (editable) with the console script mha-explorer: from another folder
    `import mha_core` works, and mha-explorer is `python -m mha_core` (its help, and an error's exit code 2)."""
    import subprocess
    import sys

    from tests.conftest import cli

    venv_bin = Path(sys.executable).parent
    imported = subprocess.run([sys.executable, "-c", "import mha_core, sys; print(mha_core.__file__)"], cwd=tmp_path,
                              env={"PATH": str(venv_bin)}, capture_output=True, text=True, check=False)
    assert imported.returncode == 0, imported.stderr[-500:]
    assert Path(imported.stdout.strip()).parent == ROOT / "mha_core"  # the checkout's code (editable)
    program = venv_bin / "mha-explorer"
    helped = subprocess.run([str(program), "--help"], cwd=tmp_path, capture_output=True, text=True, check=False)
    module = cli("--help")  # python -m mha_core's main(), in this process (test_cli.py runs that program itself)
    assert helped.returncode == 0 and helped.stdout == module.stdout and "attention" in helped.stdout
    refused = subprocess.run([str(program), "attention", "--model", str(tmp_path / "none")], cwd=tmp_path,
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and refused.stderr.startswith("error:"), refused.stderr[-500:]


def test_every_public_name_is_there_and_documented():
    import mha_core

    for name in mha_core.__all__:
        value = getattr(mha_core, name)
        assert isinstance(value, str | tuple) or (value.__doc__ or "").strip(), name


def test_a_result_draws_the_pages_figure_and_says_which_results_do(tiny):
    import plotly.graph_objects as go

    import mha_core
    from mha_core.figures import charts

    result = mha_core.run(tiny, "The cat sat on the mat.", path="explicit")
    drawn = result.figure(layer=1, head=2)
    expected = charts.head_figure(result.text_layer_maps(0, 1)[2].numpy(), result.labels[0], "Layer 1, head 2")
    assert isinstance(drawn, go.Figure) and drawn.to_json() == go.Figure(expected).to_json()
    assert result.figure().layout.title.text  # every head at a glance
    from mha_core.figures.notebook import figure_of

    with pytest.raises(TypeError, match="has no figure; these have: AttentionResult"):
        figure_of(object())


def test_results_with_a_table_show_it_in_a_notebook(lm_dirs):
    import mha_core

    model = mha_core.load_model(lm_dirs["llama-tied"])
    prediction = mha_core.predict(model, "the animal did not cross the")
    html = prediction._repr_html_()
    assert "<table" in html and html.count("<tr>") == len(prediction.top_pieces)  # a row per piece (and a header)
    generation = mha_core.generate(model, "the animal did not cross the", 3)
    assert generation._repr_html_().count("<tr>") == 3  # a row per new piece
    assert mha_core.run(model, "the animal")._repr_html_() is None  # no table: Jupyter shows its figure on request


def test_a_result_without_the_figures_loaded_says_what_to_import(tiny, monkeypatch):
    """Issue 45: the engine never imports the figures; mha_core's own names load them (they register their drawers),
    and a result asked to draw before that says what to import instead of a traceback."""
    import mha_core
    from mha_core.engine import drawable

    result = mha_core.run(tiny, "The cat sat.")
    assert drawable.DRAWERS["figure"].__module__ == "mha_core.figures.notebook"
    monkeypatch.setattr(drawable, "DRAWERS", {})
    with pytest.raises(drawable.NoDrawings, match="import mha_core.figures.notebook"):
        result.figure()
    assert result._repr_html_() is None
