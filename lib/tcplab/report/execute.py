"""Run one case notebook with papermill and keep the executed copy, whatever happens.

A notebook that raises is a result, not an exception: the pipeline records the error
and goes on with the next case. The executed notebook papermill saved up to the
failing cell is kept, so the report can show how far the case got.

The kernel speaks the report's language: ``TCPLAB_LANG`` is set for the kernel process (the
notebooks' parameters stay as they are), so every word it writes through
:class:`tcplab.words.Messages` (bound sentences, scores tables, plot labels) is in that
language, and the executed notebook records it (``metadata.tcplab.language``).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import nbformat

from .exercises import NOT_RUN_TAG, check_exercises, note_not_run, without_exercises

__all__ = ["ExecutionResult", "execute_notebook", "DEFAULT_CELL_TIMEOUT_S"]

#: Long enough for a live case that transfers for a minute, short enough to unstick a hang.
DEFAULT_CELL_TIMEOUT_S = 900


@dataclass
class ExecutionResult:
    """How running one notebook went."""

    case_id: str
    input_path: Path
    output_path: Path
    ok: bool
    duration_s: float
    parameters: dict[str, Any] = field(default_factory=dict)
    #: One line for a summary table, e.g. ``"ZeroDivisionError: division by zero"``.
    error: str | None = None
    #: The full traceback without colour codes, for the case's own page.
    traceback: str | None = None
    #: Execution count of the cell that failed, when papermill knows it.
    failed_cell: int | None = None

    @property
    def has_output(self) -> bool:
        return self.output_path.is_file()


def _strip_ansi(text: str) -> str:
    from nbconvert.filters.ansi import strip_ansi

    return strip_ansi(text)


#: One kernel start at a time changes the process environment it inherits.
_ENVIRONMENT_LOCK = threading.Lock()


@contextmanager
def _kernel_environment(changes: Mapping[str, str]):
    """``os.environ`` with ``changes`` while a kernel is started (it inherits the environment),
    as it was afterwards."""
    if not changes:
        yield
        return
    with _ENVIRONMENT_LOCK:
        before = {k: os.environ.get(k) for k in changes}
        os.environ.update(changes)
        try:
            yield
        finally:
            for key, value in before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _local_kernel_manager(socket_folder: Path):
    """The kernel manager papermill starts a case's kernel with: one that talks over Unix sockets
    in ``socket_folder`` rather than TCP ports on localhost. The kernel runs on this machine only,
    often as root; Unix sockets keep it off the network, and ipykernel (7+) stops warning on every
    case that its TCP traffic is unencrypted. The sockets live in a short private folder, not the
    Jupyter runtime folder under $HOME, because a socket's path may not exceed 107 bytes."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class LocalKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            return str(socket_folder / "kernel")

    return LocalKernelManager


def _record_run(output_path: Path, language: str | None) -> None:
    """Note in the executed notebook which language its kernel wrote in, and say in each cell
    it left unrun why it shows no output."""
    from ..i18n import LANGUAGE_METADATA
    from ..words import Messages

    nb = nbformat.read(str(output_path), as_version=4)
    if language:
        nb.metadata.setdefault("tcplab", {})[LANGUAGE_METADATA] = language
    note_not_run(nb, Messages(language)("env.cell_not_run"))
    nbformat.write(nb, str(output_path))


def execute_notebook(
    input_path: str | Path,
    output_path: str | Path,
    *,
    parameters: Mapping[str, Any] | None = None,
    case_id: str | None = None,
    kernel_name: str = "python3",
    cwd: str | Path | None = None,
    cell_timeout_s: float | None = DEFAULT_CELL_TIMEOUT_S,
    start_timeout_s: float = 60,
    progress: bool = True,
    language: str | None = None,
    exercises: str = "run",
) -> ExecutionResult:
    """Execute ``input_path`` into ``output_path`` with ``parameters`` injected.

    ``cwd`` defaults to the notebook's own folder, so relative paths in a notebook mean
    the same thing in JupyterLab and here. ``progress`` shows papermill's per-cell bar.
    ``language``: the kernel's ``TCPLAB_LANG`` (default: as this process has it).
    ``exercises``: "skip" leaves the exercises and their answers unrun (:mod:`.exercises`).
    """
    # papermill imports IPython and nbclient; import late so reading scores stays light.
    import papermill
    from papermill.exceptions import PapermillExecutionError

    input_path = Path(input_path)
    output_path = Path(output_path)
    case_id = case_id or input_path.stem
    params = dict(parameters or {})
    output_path.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(cwd) if cwd is not None else input_path.parent

    result = ExecutionResult(case_id=case_id, input_path=input_path, output_path=output_path,
                             ok=False, duration_s=0.0, parameters=params)
    start = time.monotonic()
    try:
        if not input_path.is_file():
            raise FileNotFoundError(f"notebook not found: {input_path}")
        notebook = str(input_path)
        if check_exercises(exercises) == "skip":
            notebook = without_exercises(nbformat.read(notebook, as_version=4))
        with _kernel_environment({"TCPLAB_LANG": language} if language else {}), \
                tempfile.TemporaryDirectory(prefix="tcplab-kernel-") as socket_folder:
            papermill.execute_notebook(
                notebook, str(output_path),
                parameters=params,
                kernel_name=kernel_name,
                kernel_manager_class=_local_kernel_manager(Path(socket_folder)),
                cwd=str(workdir),
                progress_bar={"desc": case_id, "leave": True} if progress else False,
                log_output=False,
                start_timeout=start_timeout_s,
                execution_timeout=cell_timeout_s,
                skip_cells_with_tag=NOT_RUN_TAG,
            )
        result.ok = True
    except PapermillExecutionError as exc:
        result.error = f"{exc.ename}: {exc.evalue}" if exc.evalue else exc.ename
        result.traceback = _strip_ansi("\n".join(exc.traceback or []))
        result.failed_cell = exc.exec_count
    except Exception as exc:  # noqa: BLE001 - kernel death, timeouts, bad JSON: all case failures
        result.error = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        import traceback

        result.traceback = "".join(traceback.format_exception(exc))
    finally:
        result.duration_s = time.monotonic() - start
    if output_path.is_file() and (language or exercises == "skip"):
        try:
            _record_run(output_path, language)
        except Exception:  # noqa: BLE001 - a notebook papermill could not finish stays as it is
            pass
    return result
