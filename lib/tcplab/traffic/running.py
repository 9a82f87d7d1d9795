"""A launched workload: its two processes, their logs, waiting, stopping."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .result import AppResult

if TYPE_CHECKING:
    from .base import Workload

SIDES = ("server", "client")
#: How long a side gets, after SIGTERM, to print its partial report before SIGKILL.
GRACE = 1.0


class WorkloadError(RuntimeError):
    """The workload did not complete; ``result`` is the partial :class:`AppResult`, ``logs`` the log files."""

    def __init__(self, message: str, result: AppResult, logs: dict[str, Path]) -> None:
        super().__init__(message)
        self.result = result
        self.logs = logs


class WorkloadTimeout(WorkloadError):
    """The workload's ``timeout`` passed before both sides ended; both were killed."""


class WorkloadFailed(WorkloadError):
    """A side exited with an error (non-zero status); the other side was stopped."""


class RunningWorkload:
    """Both sides of a workload as processes. Each side's stdout (its JSON report) goes to
    ``logdir/<side>.json``, its stderr (and the command line) to ``logdir/<side>.log``."""

    def __init__(self, workload: "Workload", logdir: Path) -> None:
        self.workload = workload
        self.logdir = Path(logdir)
        self.logs: dict[str, Path] = {side: self.logdir / f"{side}.log" for side in SIDES}
        self.outputs: dict[str, Path] = {side: self.logdir / f"{side}.json" for side in SIDES}
        self.processes: dict[str, subprocess.Popen] = {}
        self.exited: dict[str, float] = {}  # side -> time.time() when its process ended
        self.started = time.time()
        self.deadline = time.monotonic() + workload.timeout
        self._changed = threading.Condition()
        self._result: AppResult | None = None

    # --- starting ------------------------------------------------------------------------------
    def start_side(self, side: str, host: Any, argv: Sequence[str]) -> subprocess.Popen:
        """Start one side in ``host``'s namespace, in a session of its own (to kill its children too)."""
        with open(self.logs[side], "w") as log, open(self.outputs[side], "w") as out:
            log.write(f"$ ip netns exec {host.ns} {shlex.join(argv)}\n")
            log.flush()
            process = host.popen(list(argv), stdout=out, stderr=log, start_new_session=True)
        self.processes[side] = process
        threading.Thread(target=self._watch, args=(side, process), name=f"workload-{side}", daemon=True).start()
        return process

    def _watch(self, side: str, process: subprocess.Popen) -> None:
        process.wait()
        with self._changed:
            self.exited[side] = time.time()
            self._changed.notify_all()

    # --- waiting -------------------------------------------------------------------------------
    def wait(self) -> AppResult:
        """Until both sides exit. Raises :class:`WorkloadTimeout` or :class:`WorkloadFailed`."""
        if self._result is not None:
            return self._result
        with self._changed:
            while True:
                failed = [s for s in self.exited if self.processes[s].returncode != 0]
                if failed or len(self.exited) == len(self.processes):
                    break
                left = self.deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
        if failed:
            self.stop()
            codes = ", ".join(f"{s} exited {self.processes[s].returncode}" for s in failed)
            raise self.failure(WorkloadFailed, f"{self.workload.name}: {codes}")
        if len(self.exited) < len(self.processes):
            running = [s for s in self.processes if s not in self.exited]
            self.stop()
            raise self.failure(WorkloadTimeout, f"{self.workload.name}: timed out after "
                              f"{self.workload.timeout:g} s with {' and '.join(running)} still running")
        result = self.workload.summarize(self.reports(), self)
        if not result.ok:
            raise WorkloadFailed(f"{self.workload.name}: {result.error}", result, self.logs)
        self._result = result
        return result

    def reports(self) -> dict[str, dict]:
        """Each side's JSON report as printed so far ({} when it printed none)."""
        out = {}
        for side, path in self.outputs.items():
            try:
                out[side] = json.loads(path.read_text())
            except (OSError, ValueError):
                out[side] = {}
        return out

    def failure(self, kind: type[WorkloadError], message: str) -> WorkloadError:
        partial = self.workload.summarize(self.reports(), self)
        partial.ok = False
        partial.error = message + (f"; {partial.error}" if partial.error else "")
        return kind(partial.error + self._log_tails(), partial, self.logs)

    def _log_tails(self, lines: int = 5) -> str:
        text = ""
        for side, path in self.logs.items():
            try:
                tail = path.read_text().splitlines()[-lines:]
            except OSError:
                continue
            text += f"\n--- {side} ({path}) ---\n" + "\n".join(tail)
        return text

    # --- stopping ------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop both sides: SIGTERM (each prints a partial report), SIGKILL after a grace period."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in self.processes.values() if p.poll() is None]
            for process in alive:
                try:
                    os.killpg(process.pid, sig)
                    os.killpg(process.pid, signal.SIGCONT)  # a stopped process handles SIGTERM only once continued
                except ProcessLookupError:
                    pass
            for process in alive:
                try:
                    process.wait(GRACE)
                except subprocess.TimeoutExpired:
                    pass
        for process in self.processes.values():
            process.wait()
            try:
                os.killpg(process.pid, signal.SIGKILL)  # a child the side left behind (curl, iperf3)
            except ProcessLookupError:
                pass

    def __enter__(self) -> "RunningWorkload":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
