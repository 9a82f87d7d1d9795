"""Run records: one directory per run under data/runs/<case>/<run-id>/, written atomically.

A run is built in a hidden directory (``.<run-id>.partial``) and renamed into place when it
ends, complete or failed, so a reader never sees half a run. ``run.json`` says
``"running"`` until the very end: a run killed mid-way stays a hidden directory (or, if
something else went wrong, a ``running`` record) and is listed as ``crashed``, never as
complete. Everything in a record can be analysed again later without rerunning it.

::

    with record("01-send-buffer", params) as writer:
        ... write files into writer.dir ...
        writer.app = result.to_dict()
    run = writer.run          # the finished Run
    find_run("01-send-buffer", key_of(params))  # the newest complete run with those params
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import secrets
import shutil
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator, Mapping

import pandas as pd

from .files import is_partial, write_atomically
from .lab.state import process_alive

__all__ = ["SCHEMA", "Run", "RunWriter", "data_root", "environment", "find_run", "key_of", "list_runs",
           "load_run", "record", "package_version", "runs_root", "tool_version"]

SCHEMA = "tcplab.run/1"
RUN_JSON = "run.json"
PARTIAL_SUFFIX = ".partial"
COMPLETE, FAILED, RUNNING, CRASHED = "complete", "failed", "running", "crashed"
LIBRARIES = ("tcplab", "pyroute2", "numpy", "pandas")
TOOLS = {"tcpdump": ["tcpdump", "--version"], "ss": ["ss", "-V"]}


def data_root() -> Path:
    """$TCPLAB_DATA, or the repository's data/ folder."""
    env = os.environ.get("TCPLAB_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data"


def runs_root(runs_dir: str | os.PathLike | None = None) -> Path:
    """Where runs are kept: ``runs_dir``; else ``data_root()/runs``, unless that cannot be
    written (a shared checkout used by a user who does not own it): then this user's own
    ``$XDG_DATA_HOME/tcplab/runs`` (``~/.local/share``), or ``/tmp/tcplab-<uid>/runs`` for a
    user without a writable home. Recorded replay data stays in ``data_root()/replay``."""
    if runs_dir is not None:
        return Path(runs_dir)
    shared = data_root() / "runs"
    if os.environ.get("TCPLAB_DATA") or _can_write(shared):
        return shared
    home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    if _can_write(Path(home) / "tcplab" / "runs"):
        return Path(home) / "tcplab" / "runs"
    return Path(f"/tmp/tcplab-{os.getuid()}") / "runs"


def _can_write(folder: Path) -> bool:
    """Whether ``folder`` can be written, or made by this user (its nearest existing parent
    can be written)."""
    while not folder.exists():
        if folder.parent == folder:
            return False
        folder = folder.parent
    return os.access(folder, os.W_OK)


def key_of(params: Mapping[str, Any]) -> str:
    """A stable hash of a run's parameters: equal parameters, equal key. Unset parameters
    (None) are left out, so a new optional parameter does not orphan the runs recorded
    before it existed (they ran without it, which is what unset means)."""
    text = json.dumps(_without_unset(params), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _without_unset(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_unset(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_without_unset(v) for v in value]
    return value


def tool_version(argv: list[str]) -> str | None:
    """The first line a tool prints about itself (``tcpdump --version``), or None. Asked once
    per process: every run record carries it, and in a UML kernel each start of a tool costs
    a good part of a second."""
    return _tool_version(tuple(argv))


@functools.cache
def _tool_version(argv: tuple[str, ...]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


@functools.cache
def package_version(package: str) -> str | None:
    """The installed version of a Python package, or None (read once per process)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment(**extra: Any) -> dict[str, Any]:
    """Where and with what a run was made; ``extra`` adds run-specific facts (backend, cc)."""
    return {
        "kernel": platform.release(),
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "libraries": {name: package_version(name) for name in LIBRARIES},
        "tools": {name: tool_version(argv) for name, argv in TOOLS.items()},
        **extra,
    }


def _write_json(path: Path, data: Any) -> None:
    write_atomically(path, json.dumps(data, indent=2, default=str))


def _new_run_id() -> str:
    """Sortable by start time; the random tail keeps two runs of one microsecond apart."""
    now = time.time()
    return time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}-{secrets.token_hex(2)}"


@dataclass
class Run:
    """A run record on disk, a plain container: what it says (``run.json``) and its files, tables
    read when first asked for. The typed views of it live with their types (:attr:`params`)."""

    dir: Path
    meta: dict[str, Any] = field(repr=False)

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "Run":
        directory = Path(directory)
        return cls(directory, json.loads((directory / RUN_JSON).read_text()))

    # --- what the record says -----------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.meta["run_id"]

    @property
    def case(self) -> str:
        return self.meta["case"]

    @property
    def key(self) -> str:
        return self.meta.get("key", "")

    @property
    def status(self) -> str:
        """complete, failed, running (its writer is still at work), or crashed (still marked
    running, but the process writing it is gone)."""
        status = self.meta.get("status", RUNNING)
        if status == RUNNING and not process_alive(self.meta.get("pid")):
            return CRASHED
        return status

    @property
    def error(self) -> str | None:
        return self.meta.get("error")

    @property
    def params(self) -> dict[str, Any]:
        """The parameters as stored (plain values in stored units). Each parameter set reads
        itself back from a run: ``PathSpec.of_run(run)``, ``Workload.of_run(run)``,
        ``ObserveSpec.of_run(run)``; so do ``AppResult.of_run(run)`` and the packets
        (``tcplab.analysis.read_packets(run.pcap)``)."""
        return self.meta.get("params", {})

    @property
    def environment(self) -> dict[str, Any]:
        return self.meta.get("environment", {})

    @property
    def files(self) -> list[str]:
        return self.meta.get("files", [])

    @property
    def observe(self) -> dict[str, Any]:
        """What the observers reported: capture stats, telemetry and trace summaries."""
        return self.meta.get("observe", {})

    def amend_observe(self, name: str, value: Any) -> None:
        """Add what was observed from outside the process that wrote the run (a UML kernel's
        wait for a host CPU, read on the host), once the run is finished."""
        self.meta.setdefault("observe", {})[name] = value
        _write_json(self.dir / RUN_JSON, self.meta)

    # --- files ---------------------------------------------------------------------------------
    @property
    def pcaps(self) -> list[Path]:
        """Every capture of the run, the main one (see :attr:`pcap`) first."""
        return [self.dir / name for name in self.meta.get("pcaps", []) if (self.dir / name).exists()]

    @property
    def pcap(self) -> Path | None:
        pcaps = self.pcaps
        return pcaps[0] if pcaps else None

    def _table(self, name: str) -> pd.DataFrame:
        path = self.dir / name
        return pd.read_parquet(path) if path.exists() else pd.DataFrame()

    @cached_property
    def telemetry(self) -> pd.DataFrame:
        return self._table("telemetry.parquet")

    @cached_property
    def trace(self) -> pd.DataFrame:
        return self._table("trace.parquet")

    @cached_property
    def counters(self) -> dict[str, dict[str, int]]:
        """Per host, the nstat counters (TcpExtTCPToZeroWindowAdv, …) the run moved, by how much."""
        path = self.dir / "counters.json"
        return json.loads(path.read_text()) if path.exists() else {}

    @cached_property
    def sysctls(self) -> dict[str, dict[str, str]]:
        path = self.dir / "sysctl.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def log(self, name: str) -> str:
        return (self.dir / "logs" / name).read_text()


class RunWriter:
    """Builds one run record in a hidden directory; :meth:`finish` publishes it.

    Write files into :attr:`dir` (``logs/`` is :attr:`logdir`); set :attr:`app`,
    :attr:`observe`, :attr:`pcaps` and :attr:`environment` as they become known.
    """

    def __init__(self, case: str, params: Mapping[str, Any], *, key: str | None = None,
                 runs_dir: str | os.PathLike | None = None) -> None:
        if not case or "/" in case or case.startswith("."):
            from .units import ParameterError

            raise ParameterError("case", case, "a name without '/' that does not start with '.'")
        self.case = case
        self.params = dict(params)
        self.key = key or key_of(self.params)
        self.run_id = _new_run_id()
        self.case_dir = runs_root(runs_dir) / case
        self.final_dir = self.case_dir / self.run_id
        self.dir = self.case_dir / f".{self.run_id}{PARTIAL_SUFFIX}"
        self.logdir = self.dir / "logs"
        self.environment: dict[str, Any] = {}
        self.app: dict[str, Any] | None = None
        self.observe: dict[str, Any] = {}
        self.pcaps: list[str] = []
        self.run: Run | None = None
        self.logdir.mkdir(parents=True)
        self._save(RUNNING, None)

    def _meta(self, status: str, error: str | None) -> dict[str, Any]:
        files = sorted(str(p.relative_to(self.dir)) for p in self.dir.rglob("*")
                       if p.is_file() and p.name != RUN_JSON and not is_partial(p))
        return {
            "schema": SCHEMA, "case": self.case, "run_id": self.run_id, "status": status, "error": error,
            "pid": os.getpid(), "key": self.key, "params": self.params, "environment": self.environment,
            "app": self.app, "observe": self.observe, "pcaps": self.pcaps, "files": files,
        }

    def _save(self, status: str, error: str | None) -> None:
        _write_json(self.dir / RUN_JSON, self._meta(status, error))

    def write_json(self, name: str, data: Any) -> Path:
        path = self.dir / name
        _write_json(path, data)
        return path

    def write_table(self, name: str, df: pd.DataFrame) -> Path:
        path = self.dir / name
        df.to_parquet(path, index=False)
        return path

    def write_log(self, name: str, text: str) -> Path:
        path = self.logdir / name
        path.write_text(text)
        return path

    def finish(self, status: str = COMPLETE, error: str | None = None) -> Run:
        """Mark the record ``complete`` or ``failed`` and move it into place."""
        if status not in (COMPLETE, FAILED):
            raise ValueError(f"a run finishes complete or failed, not {status!r}")
        # Rename first with status still "running", then flip the status in place with an
        # atomic replace: whichever moment a crash hits, nothing half-written says complete.
        self._save(RUNNING, error)
        os.rename(self.dir, self.final_dir)
        self.dir, self.logdir = self.final_dir, self.final_dir / "logs"
        _write_json(self.dir / RUN_JSON, self._meta(status, error))
        self.run = Run.load(self.dir)
        return self.run

    def abandon(self) -> None:
        """Remove a record that should not exist (nothing worth keeping happened)."""
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def record(case: str, params: Mapping[str, Any], *, runs_dir: str | os.PathLike | None = None) -> Iterator[RunWriter]:
    """A :class:`RunWriter` that finishes ``complete``, or ``failed`` (with the traceback
    in logs/error.log) when the block raises; the exception goes on."""
    writer = RunWriter(case, params, runs_dir=runs_dir)
    try:
        yield writer
    except BaseException as exc:
        writer.write_log("error.log", "".join(traceback.format_exception(exc)))
        writer.finish(FAILED, f"{type(exc).__name__}: {exc}")
        raise
    writer.finish(COMPLETE)


def _records(case_dir: Path) -> Iterator[Run]:
    for directory in sorted(case_dir.iterdir()):
        if not directory.is_dir():
            continue
        try:
            yield Run.load(directory)
        except (OSError, ValueError):
            # No readable run.json: a writer died before its first save.
            yield Run(directory, {"run_id": directory.name, "case": case_dir.name, "status": RUNNING})


def list_runs(case: str | None = None, *, runs_dir: str | os.PathLike | None = None) -> list[Run]:
    """Every run (of ``case``, or of all cases), oldest first; crashed ones say so in .status."""
    root = runs_root(runs_dir)
    if not root.is_dir():
        return []
    case_dirs = [root / case] if case is not None else sorted(p for p in root.iterdir() if p.is_dir())
    runs = [run for d in case_dirs if d.is_dir() for run in _records(d)]
    return sorted(runs, key=lambda r: r.run_id.lstrip("."))


def load_run(directory: str | os.PathLike) -> Run:
    return Run.load(directory)


def find_run(case: str, key: str, *, runs_dir: str | os.PathLike | None = None) -> Run | None:
    """The newest complete run of ``case`` with parameters hashing to ``key``."""
    # The key is recomputed from the recorded parameters: keys stored by older versions
    # of key_of still counted unset parameters.
    matches = [r for r in list_runs(case, runs_dir=runs_dir) if r.status == COMPLETE and key_of(r.params) == key]
    return matches[-1] if matches else None
