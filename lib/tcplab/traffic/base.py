"""What every workload shares: common parameters, buffer limits, launching the two sides."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, TypeVar

from ..lab.sysctl import available_cc, buffer_limits
from ..params import Params, param
from ..units import ParameterError, format_size
from .listening import wait_listening
from .result import AppResult
from .running import SIDES, RunningWorkload, WorkloadFailed, WorkloadTimeout

SIZE_MAX = 64 * 1024**3
BUFFER_MAX = 2**31 - 1  # an int in setsockopt
IO_MAX = 16 * 1024**2

WORKLOADS: dict[str, type["Workload"]] = {}
W = TypeVar("W", bound=type["Workload"])


def register(cls: W) -> W:
    WORKLOADS[cls.name] = cls
    return cls


def program(name: str, config: Mapping[str, Any]) -> list[str]:
    """The argv of one of tcplab's side programs (:mod:`tcplab.traffic.programs`)."""
    return [sys.executable, "-m", f"tcplab.traffic.programs.{name}", json.dumps(config)]


def other(side: str) -> str:
    return "client" if side == "server" else "server"


@dataclass(frozen=True)
class Workload(Params):
    """A workload's parameters; :meth:`launch` runs it on a live :class:`~tcplab.lab.NetPath`."""

    name: ClassVar[str] = ""

    clamp_ok: bool = param("bool", False,
                           "let a socket buffer above net.core.wmem_max/rmem_max through: the kernel clamps it "
                           "silently to 2 x max (to show the clamp); off: such a buffer is refused before the run")
    port: int = param("int", 5001, "server port", low=1, high=65535)
    timeout: float = param("duration", "60s", "wall-clock limit of the whole workload; both sides are killed after it",
                           low=0.1, high=3600.0)
    cc: str = param("str", "bbr", "congestion control of each socket (TCP_CONGESTION, read back with getsockopt)")

    @staticmethod
    def of_run(run: Any) -> "Workload":
        """The workload (of its own kind, from :data:`WORKLOADS`) a run record
        (:class:`tcplab.runs.Run`) ran."""
        stored = run.params.get("workload", {})
        if stored.get("name") not in WORKLOADS:
            raise ValueError(f"{run.dir}: workload {stored.get('name')!r} is not one of {', '.join(sorted(WORKLOADS))}")
        return WORKLOADS[stored["name"]].from_record(stored)

    def check_machine(self) -> None:
        available = available_cc()
        if available and self.cc not in available:
            raise ParameterError("cc", self.cc, "one of " + ", ".join(available), "not available in this kernel")

    @classmethod
    def help_rows(cls) -> list[tuple[str, str, str, str]]:
        """The workload's own parameters first, then the ones every workload has."""
        rows = super().help_rows()
        common = set(Workload.names())
        return [r for r in rows if r[0] not in common] + [r for r in rows if r[0] in common]

    # --- what the workload does -------------------------------------------------------------------
    def sender(self) -> str:
        """"server" or "client": the side that sends the bulk of the data."""
        raise NotImplementedError

    def receiver(self) -> str:
        return other(self.sender())

    def expected_bytes(self) -> int | None:
        """Payload bytes the receiving application must get, exactly, for the run to count as
        complete; None when the program decides (iperf3 checks its own minimum)."""
        return None

    def commands(self, path: Any) -> dict[str, list[str]]:
        """The argv of each side, keyed by "server" and "client"."""
        raise NotImplementedError

    # --- limits -----------------------------------------------------------------------------------
    def buffers(self) -> Iterator[tuple[str, int | None, str]]:
        """(parameter, requested bytes, limiting sysctl) for each socket buffer the workload sets."""
        for name, key in (("sndbuf", "net.core.wmem_max"), ("rcvbuf", "net.core.rmem_max")):
            if hasattr(self, name):
                yield name, getattr(self, name), key

    def check_limits(self, host: Mapping[str, int]) -> None:
        """Refuse a buffer the kernel would silently clamp, saying what it would become
        (unless ``clamp_ok``: the clamp is what the run is meant to show)."""
        if self.clamp_ok:
            return
        for name, value, key in self.buffers():
            limit = host.get(key)
            if value is None or limit is None or value <= limit:
                continue
            # The setting that raises it is a value of the phrase: a key's placeholders are {words}.
            setting = f"host={{'{key}': ...}}"
            raise ParameterError(
                name, format_size(value), f"at most {limit} bytes ({key})",
                f"{name} {format_size(value)} is above {key} {limit}: the kernel would clamp it to "
                f"{2 * limit} bytes (2 x max); raise it with {setting}",
            )

    # --- running ----------------------------------------------------------------------------------
    def launch(self, path: Any, logdir: Path) -> RunningWorkload:
        """Start the server, wait until it listens, start the client; return at once."""
        self.check_limits(buffer_limits())
        commands = self.commands(path)
        logdir = Path(logdir)
        logdir.mkdir(parents=True, exist_ok=True)
        running = RunningWorkload(self, logdir)
        try:
            server = running.start_side("server", path.server, commands["server"])
            if not wait_listening(path.server, self.port, server, running.deadline):
                exited = server.poll() is not None
                running.stop()
                kind = WorkloadFailed if exited else WorkloadTimeout
                why = "the server exited before listening" if exited else "the server never listened"
                raise running.failure(kind, f"{self.name}: {why} on port {self.port}")
            running.start_side("client", path.client, commands["client"])
        except BaseException:
            running.stop()
            raise
        return running

    def run(self, path: Any, logdir: Path) -> AppResult:
        """Launch and wait."""
        with self.launch(path, logdir) as running:
            return running.wait()

    # --- results ----------------------------------------------------------------------------------
    def summarize(self, reports: Mapping[str, dict], running: RunningWorkload) -> AppResult:
        """The application's view from the side programs' reports (partial ones too)."""
        problems = [f"{side}: {reports[side]['error']}" for side in SIDES if reports[side].get("error")]
        problems += [f"{side}: no report" for side in SIDES if not reports[side]]
        received = reports[self.receiver()].get("received", 0)
        expected = self.expected_bytes()
        if not problems and expected is not None and received != expected:
            problems.append(f"{self.receiver()} read {received} of {expected} bytes")
        starts = [r["first_write"] for r in reports.values() if r.get("first_write") is not None]
        ends = [r["last_read"] for r in reports.values() if r.get("last_read") is not None]
        return AppResult(
            workload=self.name, ok=not problems, error="; ".join(problems) or None, bytes=received,
            start=min(starts) if starts else None, end=max(ends) if ends else None,
            requests=list(reports["client"].get("requests", [])),
            sockets={side: dict(reports[side].get("socket", {})) for side in SIDES},
            extra={"sides": {side: {k: v for k, v in reports[side].items() if k not in ("socket", "requests")}
                             for side in SIDES}},
        )
