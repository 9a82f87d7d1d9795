"""Parameters stated in a case's Markdown follow the run (report.parameters)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tcplab.course import available_cases, room
from tcplab.i18n import translation_path
from tcplab.report import parameters, prose
from tcplab.report.html import render_cells
from tcplab.words import languages

CASES = available_cases()


def _notebook(injected: dict | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('rtt = "20ms"\nrcvbuf = "8KB"\ncc = "cubic"\nsize = None\n')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_markdown_cell(
        'A <span data-param="rtt:duration">20 ms</span> path, <span data-param="rcvbuf:size">8 KB</span> '
        'of `SO_RCVBUF`, <span data-param="cc:word">cubic</span>.')]
    if injected:
        nb.metadata["papermill"] = {"parameters": injected}
    return nb


def test_a_page_states_the_parameters_its_run_had():
    assert parameters.notebook_parameters(_notebook({"rtt": "40ms"})) == {
        "rtt": "40ms", "rcvbuf": "8KB", "cc": "cubic", "size": None}
    filled = parameters.fill_notebook(_notebook({"rtt": "40ms", "rcvbuf": 65536, "cc": "bbr"})).cells[1].source
    assert filled == "A 40 ms path, 64 KB of `SO_RCVBUF`, bbr."
    html = render_cells(_notebook({"rtt": "40ms"})).html
    assert "A 40 ms path, 8 KB of <code>SO_RCVBUF</code>, cubic." in html and "data-param" not in html
    # The marked values are the run's, not the prose's own numbers.
    assert prose.static_numbers(_notebook().cells[1].source) == []


def test_a_span_that_names_no_parameter_or_no_value_is_refused():
    with pytest.raises(KeyError, match="'delay'"):
        parameters.fill('<span data-param="delay:duration">5 ms</span>', {"rtt": "20ms"})
    with pytest.raises(ValueError, match="size: .* needs a value"):
        parameters.fill('<span data-param="size:size">4 MB</span>', {"size": None})
    with pytest.raises(ValueError, match="one of duration, size, rate, word"):
        parameters.written("rtt", "furlongs", "20ms")


@pytest.mark.parametrize("case", CASES)
def test_every_marked_value_shows_its_default_in_jupyterlab(case):
    """A reader of the notebook in JupyterLab sees the span's own words: they must be the
    default's, in every language, and name a parameter the notebook has."""
    nb = nbformat.read(room(case).notebook, as_version=4)
    defaults = parameters.notebook_parameters(nb)
    texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    for path in (translation_path(case, language) for language in languages() if language != "en"):
        texts += [entry["text"] for entry in json.loads(path.read_text(encoding="utf-8"))["cells"].values()
                  if entry.get("text")]
    for text in texts:
        for name, kind, shown in parameters.spans(text):
            assert name in defaults, (case, name)
            assert shown == parameters.written(name, kind, defaults[name]), (case, name, shown)
