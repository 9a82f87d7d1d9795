"""Hand the case notebooks out to students: plain, or as an nbgrader assignment that grades them.

A released notebook is the student edition to *run*, where :mod:`.editions` makes the student
edition to *read*: the cells tagged ``answer`` (worked answers) and ``instructor`` (notes that
answer exercises) are gone, code and all, and no cell has an output, so the page fills only as
the student runs it, after writing the worksheet. What else changes:

* the worksheet cell is written from the case's ``worksheet.toml`` (:func:`.worksheet.worksheet_source`):
  every item, how to write an answer, its unit or choices and points;
* a cell after it records the worksheet as it stands when the first run starts (:mod:`.stamps`);
* the checks cell keeps only what the runs measured (:func:`measurements_only`): no theory
  value, tolerance, bound or rule survives, and the scores table shows the measurements alone;
* the notebook's metadata carries the release's stamp (case, worksheet version, a digest of its
  items), which grading holds a submission to.

Everything else stays: the parameters, the set-up cells, the theory the page tells after the
worksheet. A notebook released in a translation has its Markdown in that language and a first
cell that makes what its code writes speak it too. Released notebooks run anywhere tcplab is
installed: live where the machine can run the lab, else in replay.

:func:`release_course` writes the same notebooks as an nbgrader *source* tree,
``<course>/source/<assignment>/<case>.ipynb``, the worksheet an autograded answer cell and one
hidden autograder test per item (:mod:`.autograde`) that scores it against the class's reference
measurement, so that ``nbgrader generate_assignment``, ``collect``, ``autograde``,
``generate_feedback`` and ``export`` do the rest.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Iterable, Sequence

import nbformat

from ..course import room
from ..files import write_atomically
from ..i18n import FALLBACK_LANGUAGE, LANGUAGE_METADATA, translate_notebook
from ..units import ParameterError
from ..words import Messages
from . import scores
from .answers import written_answers
from .editions import EDITION_TAGS, without_instructor_parts
from .worksheet import WORKSHEET_TAG, Worksheet, read_worksheet, worksheet_source

__all__ = ["RELEASE_REMOVED", "CHECK_BUILDERS", "RUN_TAG", "measurements_only", "student_notebook", "release",
           "release_course", "NBGRADER_CONFIG"]

#: Cells a released notebook leaves out, their code included: those the student edition leaves
#: out, less the set-up cells a page hides but a run needs. A released notebook must still run
#: without them (tests/report/test_release.py runs every case so).
RELEASE_REMOVED = EDITION_TAGS["student"][0] - EDITION_TAGS["instructor"][0]
#: The functions that make a scored check, by the name a notebook calls them: a released
#: notebook calls none of them, only :func:`.scores.measurement`.
CHECK_BUILDERS = {f.__name__: f for f in (scores.within, scores.at_least, scores.at_most, scores.between,
                                          scores.equals, scores.check, scores.or_explained)}
#: The tag of every cell of an nbgrader release but its scoring tests: autograde skips them
#: (nbgrader_config.py: ``c.Execute.skip_cells_with_tag``), so grading runs no lab.
RUN_TAG = "tcplab-run"
NBGRADER_CONFIG = "nbgrader_config.py"
_CONFIG_TEXT = '''# nbgrader's configuration of this course (tcplab release wrote it; it is yours to edit).
c = get_config()
c.CourseDirectory.course_id = {course!r}
# tcplab's notebooks tag every cell but their scoring tests "{tag}": autograde scores each worksheet
# item against the class's reference measurement without running the lab again.
c.Execute.skip_cells_with_tag = "{tag}"
# Feedback shows each test's verdict and what it teaches, not the data the hidden test scored with.
c.GenerateFeedback.preprocessors = ["nbgrader.preprocessors.GetGrades", "nbgrader.preprocessors.ClearHiddenTests",
                                    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"]
'''


# -- the checks cell: what the runs measured, without the rules -------------------------------------

def _measured_call(call: ast.Call) -> ast.Call:
    """``within(name, predicted, measured, tolerance, unit=...)`` as ``measurement(name, measured,
    unit=...)``; ``or_explained(base, …)`` as its base's."""
    builder = CHECK_BUILDERS[call.func.id]
    bound = inspect.signature(builder).bind(*call.args, **{k.arg: k.value for k in call.keywords})
    given = bound.arguments
    if builder is scores.or_explained:
        return _measured_call(given["base"])
    keywords = [ast.keyword("unit", given["unit"])] if "unit" in given else []
    return ast.Call(ast.Name("measurement", ast.Load()), [given["name"], given.get("measured", ast.Constant(None))],
                    keywords)


class _Measurements(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id in CHECK_BUILDERS:
            return _measured_call(node)
        return self.generic_visit(node)


def _names(node: ast.AST, context: type) -> set[str]:
    """The names ``node`` binds (``ast.Store``: assigned, defined, imported) or reads (``ast.Load``)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}
    if context is ast.Store:
        names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        names |= {(a.asname or a.name).split(".")[0] for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names}
    return names


def measurements_only(source: str) -> str:
    """A checks cell as released: each check made as a :func:`.scores.measurement` of what it
    measured, and only the statements those measurements and ``publish`` need, so that no
    expected value, bound, tolerance or rule (nor a comment on them) is left."""
    tree = _Measurements().visit(ast.parse(source))
    kept, needed = [], set()
    for statement in reversed(tree.body):
        calls = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                 for n in ast.walk(statement) if isinstance(n, ast.Call)}
        if calls & {"measurement", "publish"} or _names(statement, ast.Store) & needed:
            kept.insert(0, statement)
            needed |= _names(statement, ast.Load)
    return "\n".join(map(_written, kept)) + "\n"


def _written(statement: ast.stmt) -> str:
    """A statement as code again, a list of checks one to a line."""
    if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.List) and len(statement.value.elts) > 1:
        targets = " = ".join(ast.unparse(t) for t in statement.targets)
        return "\n".join([f"{targets} = [", *(f"    {ast.unparse(e)}," for e in statement.value.elts), "]"])
    return ast.unparse(ast.fix_missing_locations(statement))


def _without_builders(source: str) -> str:
    """A cell's imports of :data:`CHECK_BUILDERS` from tcplab.report replaced by
    ``measurement``; the rest of the cell as it is."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for node in reversed(tree.body):
        if not (isinstance(node, ast.ImportFrom) and node.module in ("tcplab.report", "tcplab.report.scores")):
            continue
        names = [a for a in node.names if a.name not in CHECK_BUILDERS]
        if len(names) == len(node.names):
            continue
        if not any(a.name == "measurement" for a in names):
            names.append(ast.alias("measurement"))
        line = ast.unparse(ast.ImportFrom(node.module, names, node.level)) + "\n"
        lines[node.lineno - 1:node.end_lineno] = [line]
    return "".join(lines)


def _calls_builders(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in CHECK_BUILDERS
               for n in ast.walk(tree))


# -- the notebook students get -------------------------------------------------------------------

def _speaks(language: str) -> nbformat.NotebookNode:
    """The first cell of a translated release: tcplab's words follow ``TCPLAB_LANG``."""
    cell = nbformat.v4.new_code_cell(
        "# This notebook is in this language: what tcplab writes in it (tables, plots, sentences) is too.\n"
        f"import os\nos.environ[\"TCPLAB_LANG\"] = {json.dumps(language)}")
    cell.metadata["tags"] = ["remove-cell"]
    cell.metadata["jupyter"] = {"source_hidden": True}
    return cell


def _recorder(t: Messages) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(f"# {t('stamps.cell')}\npage.record_predictions()")
    cell.metadata["tags"] = ["remove-input"]
    cell.metadata["jupyter"] = {"source_hidden": True}
    return cell


def student_notebook(nb: nbformat.NotebookNode, case_id: str, language: str = FALLBACK_LANGUAGE,
                     course_dir: str | Path | None = None) -> nbformat.NotebookNode:
    """``nb`` (a case's source notebook) as it is handed to students, in ``language``."""
    worksheet = read_worksheet(room(case_id, course_dir))
    t = Messages(language)
    released = translate_notebook(nb, language, case_id=case_id, course_dir=course_dir)
    released.cells = [c for c in released.cells if not RELEASE_REMOVED & set(c.metadata.get("tags", []))]
    without_instructor_parts(released)
    cells = []
    for cell in released.cells:
        if cell.cell_type == "markdown" and not cell.source.strip():
            continue  # a cell that was an instructor's span and nothing else
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if WORKSHEET_TAG in cell.metadata.get("tags", []):
                cell.source = worksheet_source(worksheet, language)
                cells += [cell, _recorder(t)]
                continue
            cell.source = measurements_only(cell.source) if _calls_builders(cell.source) else _without_builders(cell.source)
        cells.append(cell)
    released.cells = cells
    if language != FALLBACK_LANGUAGE:
        released.cells.insert(0, _speaks(language))
    meta = released.metadata.setdefault("tcplab", {})
    meta["edition"] = "student"
    meta[LANGUAGE_METADATA] = language
    meta["release"] = worksheet.stamp
    return released


def _untouched(path: Path) -> bool:
    """Whether ``path`` is a released notebook nobody worked in: no output, no answer written."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - not a notebook: not ours to overwrite either
        return False
    if "release" not in (nb.metadata.get("tcplab") or {}):
        return False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count"):
            return False
        if WORKSHEET_TAG in cell.metadata.get("tags", []):
            if any(w.value is not None for w in written_answers(cell.source).values()):
                return False
    return True


def _write_all(made: dict[Path, nbformat.NotebookNode], out_dir: Path) -> list[Path]:
    """Each notebook to its path, none over a notebook a student worked in (refused before any
    is written)."""
    worked = [p for p in made if p.exists() and not _untouched(p)]
    if worked:
        raise ParameterError("--output", str(out_dir), "a folder without notebooks a student worked in",
                             f"it holds {worked[0]}, which has outputs, a written worksheet, or is no release")
    texts = {path: nbformat.writes(nb) for path, nb in made.items()}
    for path, text in texts.items():
        try:
            write_atomically(path, text)  # each whole or not at all
        except OSError as exc:
            raise ParameterError("--output", str(path), "a folder this user can write", str(exc.strerror or exc)) from None
    return list(made)


def _folder(out_dir: str | Path) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ParameterError("--output", str(out_dir), "a folder for the students' notebooks", "it is a file")
    return out_dir


def _source(case: str, language: str, course_dir: str | Path | None) -> nbformat.NotebookNode:
    return student_notebook(nbformat.read(room(case, course_dir).notebook, as_version=4), case, language,
                            course_dir=course_dir)


def release(cases: Iterable[str], out_dir: str | Path, language: str = FALLBACK_LANGUAGE,
            course_dir: str | Path | None = None) -> list[Path]:
    """Write each case's student notebook to ``out_dir/<case>.ipynb``; the paths written. Every
    notebook is made before the first is written: a case that cannot be released, or a notebook
    there that a student worked in, writes nothing."""
    out_dir = _folder(out_dir)
    return _write_all({out_dir / f"{case}.ipynb": _source(case, language, course_dir) for case in cases}, out_dir)


def release_course(cases: Sequence[str], course: str | Path, assignment: str, references: Sequence[str | Path],
                   language: str = FALLBACK_LANGUAGE, course_dir: str | Path | None = None) -> tuple[list[Path], list[str]]:
    """The cases as the nbgrader assignment ``assignment`` of the course folder ``course``:
    ``source/<assignment>/<case>.ipynb``, scored against ``references`` (the class's reference
    runs: summary.json files or executed notebooks), and ``nbgrader_config.py`` where the course
    has none. Returns the paths written and what the teacher should know (a config of their own
    that does not skip the lab at autograde)."""
    from .autograde import scoring_cells
    from .grading import read_references

    course = _folder(course)
    if not assignment or not all(ch.isalnum() or ch in "-_" for ch in assignment):
        raise ParameterError("--assignment", assignment, "a name of letters, digits, - and _ (nbgrader's assignment id)")
    if not references:
        raise ParameterError("--reference", "", "a summary.json of tcplab report or an executed notebook of each case",
                             "an nbgrader release scores against the class's reference run")
    measured = read_references(references)
    made = {}
    for case in cases:
        nb = _source(case, language, course_dir)
        worksheet: Worksheet = read_worksheet(room(case, course_dir))
        # The worksheet stays an ordinary cell: nbgrader would replace a "solution" cell with its
        # stub (raise NotImplementedError()); the tests after it hold the item list.
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.metadata.setdefault("tags", []).append(RUN_TAG)
        nb.cells += scoring_cells(worksheet, measured.get(case, {}), language, f"{case}.ipynb",
                                  ", ".join(map(str, references)))
        nb.metadata["tcplab"]["release"]["assignment"] = assignment
        made[course / "source" / assignment / f"{case}.ipynb"] = nb
    written = _write_all(made, course)
    notes = []
    config = course / NBGRADER_CONFIG
    if not config.exists():
        written.append(write_atomically(config, _CONFIG_TEXT.format(course=course.resolve().name, tag=RUN_TAG)))
    elif RUN_TAG not in config.read_text(encoding="utf-8", errors="replace"):
        notes.append(Messages()("release.config_without_skip", config=str(config), tag=RUN_TAG))
    return written, notes
