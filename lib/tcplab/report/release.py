"""Hand the case notebooks out to students to run in JupyterLab (nbgrader's "release" step).

A released notebook is the student edition to *run*, where :mod:`.editions` makes the student
edition to *read*: the cells tagged ``answer`` (worked answers) and ``instructor`` (notes that
answer exercises) are gone, code and all, and no cell has an output, so the page fills only as
the student runs it, after writing the worksheet. Everything else stays: the parameters cell,
the worksheet cell that ``tcplab grade`` reads back, the set-up cells a reader never sees. A
notebook released in a translation has its Markdown in that language and a first cell that makes
what its code writes (tables, plots, bound sentences) speak it too. Released notebooks run
anywhere tcplab is installed: live where the machine can run the lab, else in replay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import nbformat

from ..course import room
from ..i18n import FALLBACK_LANGUAGE, LANGUAGE_METADATA, translate_notebook
from ..units import ParameterError
from .editions import EDITION_TAGS, without_instructor_parts

__all__ = ["RELEASE_REMOVED", "student_notebook", "release"]

#: Cells a released notebook leaves out, their code included: those the student edition leaves
#: out, less the set-up cells a page hides but a run needs. A released notebook must still run
#: without them (tests/report/test_release.py runs every case so).
RELEASE_REMOVED = EDITION_TAGS["student"][0] - EDITION_TAGS["instructor"][0]


def _speaks(language: str) -> nbformat.NotebookNode:
    """The first cell of a translated release: tcplab's words follow ``TCPLAB_LANG``."""
    cell = nbformat.v4.new_code_cell(
        "# This notebook is in this language: what tcplab writes in it (tables, plots, sentences) is too.\n"
        f"import os\nos.environ[\"TCPLAB_LANG\"] = {json.dumps(language)}")
    cell.metadata["tags"] = ["remove-cell"]
    return cell


def student_notebook(nb: nbformat.NotebookNode, case_id: str, language: str = FALLBACK_LANGUAGE,
                     course_dir: str | Path | None = None) -> nbformat.NotebookNode:
    """``nb`` (a case's source notebook) as it is handed to students, in ``language``."""
    released = translate_notebook(nb, language, case_id=case_id, course_dir=course_dir)
    released.cells = [c for c in released.cells if not RELEASE_REMOVED & set(c.metadata.get("tags", []))]
    for cell in released.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    without_instructor_parts(released)
    if language != FALLBACK_LANGUAGE:
        released.cells.insert(0, _speaks(language))
    meta = released.metadata.setdefault("tcplab", {})
    meta["edition"] = "student"
    meta[LANGUAGE_METADATA] = language
    return released


def release(cases: Iterable[str], out_dir: str | Path, language: str = FALLBACK_LANGUAGE,
            course_dir: str | Path | None = None) -> list[Path]:
    """Write each case's student notebook to ``out_dir/<case>.ipynb``; the paths written. Every
    notebook is made before the first is written: a case that cannot be released writes nothing."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ParameterError("--output", str(out_dir), "a folder for the students' notebooks", "it is a file")
    made = {case: student_notebook(nbformat.read(room(case, course_dir).notebook, as_version=4), case, language,
                                   course_dir=course_dir)
            for case in cases}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for case, nb in made.items():
            nbformat.write(nb, out_dir / f"{case}.ipynb")
            written.append(out_dir / f"{case}.ipynb")
    except OSError as exc:
        raise ParameterError("--output", str(out_dir), "a folder this user can write", str(exc.strerror or exc)) from None
    return written
