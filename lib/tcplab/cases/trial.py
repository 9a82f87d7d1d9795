"""One measured variant of a case: a run record with the analysis a notebook asks of it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from ..analysis.packets import read_packets
from ..lab import PathSpec
from ..observe.health import late_worst_s, reasons_of
from ..observe.ss import SENDING_STATES
from ..runs import Run
from ..traffic import AppResult, Workload

__all__ = ["Trial"]


#: How pages name each kind of lab kernel beside its release.
KERNEL_KINDS = {"uml": "UML", "userns": "user namespace"}


def kernel_label(kind: str | None, release: str) -> str:
    """How pages name a lab kernel: "6.18.44 (host)", "6.18.44 (user namespace)" or "6.1.176 (UML)"."""
    return f"{release} ({KERNEL_KINDS.get(kind or '', 'host')})"


def kernel_of(run: Any) -> str:
    """The lab kernel a recorded run ran on, as pages name it."""
    env = run.environment
    return kernel_label(env.get("lab_kernel"), env.get("kernel", "?"))


@dataclass
class Trial:
    """``label`` names the variant in the case ("sndbuf-16KB"); ``run`` is its record, live
    or replayed. Everything else is derived from the record, and computed once."""

    label: str
    run: Run
    replayed: bool = False

    # --- what was asked (the run's own parameter sets) ---------------------------------------
    @cached_property
    def spec(self) -> PathSpec:
        """The path's spec the run was made on."""
        return PathSpec.of_run(self.run)

    @cached_property
    def workload(self) -> Workload:
        """The workload the run ran, of its own kind."""
        return Workload.of_run(self.run)

    @property
    def rtt_s(self) -> float | None:
        """The configured round trip (NaN-free: None when the path adds no delay)."""
        return 2 * self.spec.one_way_delay or None

    @property
    def rate_bps(self) -> float | None:
        return self.spec.rate

    # --- what the application saw -----------------------------------------------------------------
    @cached_property
    def app(self) -> AppResult | None:
        return AppResult.of_run(self.run)

    @property
    def goodput_bps(self) -> float:
        return float(self.app.goodput_bps or float("nan"))

    @property
    def duration_s(self) -> float:
        return float(self.app.duration if self.app.duration is not None else float("nan"))

    @property
    def sender(self) -> str:
        """"server" or "client", as the workload defines it."""
        return self.workload.sender()

    @property
    def receiver(self) -> str:
        return self.workload.receiver()

    def side_report(self, side: str) -> dict[str, Any]:
        """What ``side``'s program reported of its run (sent, send_wait_s, extra: pauses, died …);
        empty where it reported nothing."""
        return dict((self.app.extra or {}).get("sides", {}).get(side, {}))

    @property
    def reader_pauses(self) -> list[tuple[float, float]]:
        """When the reading side stopped and resumed reading (epoch seconds), pause by pause, as
        its program recorded them; empty for a reader that never paused."""
        pauses = self.side_report(self.receiver).get("extra", {}).get("pauses", [])
        return [(float(stopped), float(resumed)) for stopped, resumed in pauses]

    def socket(self, side: str) -> dict[str, Any]:
        """What ``side``'s program read back with getsockopt: sndbuf, rcvbuf, cc, mss, …"""
        return dict((self.app.sockets or {}).get(side, {}))

    def counters(self, side: str) -> dict[str, int]:
        """How much the run moved ``side``'s nstat counters ({"TcpExtDelayedACKs": 12, …})."""
        return dict(self.run.counters.get(side, {}))

    def traced(self, event: str) -> bool:
        """Whether the run recorded the tracepoint ``event`` (a kernel built without ftrace,
        such as Debian's UML kernel, has none; the run record says why)."""
        return self.run.observe.get("trace", {}).get("events", {}).get(event) == "recorded"

    @property
    def backend(self) -> str | None:
        return self.run.environment.get("backend")

    @property
    def kernel(self) -> str | None:
        return self.run.environment.get("kernel")

    @property
    def health(self) -> dict[str, Any]:
        """How much the machine disturbed this run (``observe.health``); {} for runs recorded
        before runs kept it."""
        return dict(self.run.observe.get("health") or {})

    @property
    def late_s(self) -> float:
        """The latest the path's delay line released a packet past its due time in this run (the
        worst of its queues, as ``observe.health`` recorded it): how far a time the capture saw
        can lag the line. 0 where no delay line ran (netem keeps the kernel's own time) or the
        record predates it (:func:`tcplab.observe.health.late_worst_s`)."""
        return late_worst_s(self.health)

    @property
    def disturbed(self) -> list[str]:
        """Why the machine disturbed this run; empty when it did not (or nobody read it)."""
        return reasons_of(self.run)

    @property
    def kernel_name(self) -> str:
        """The lab kernel this run ran on, as pages name it: "6.1.176 (UML)"."""
        return kernel_of(self.run)

    # --- what the capture and the kernel saw ------------------------------------------------------
    @cached_property
    def packets(self):
        """The capture read by the analysis engine, named after the variant (plot titles say it)."""
        if self.run.pcap is None:
            raise FileNotFoundError(f"run {self.run.dir} has no capture")
        table = read_packets(self.run.pcap)
        table.name = self.label
        return table

    @property
    def telemetry(self) -> pd.DataFrame:
        return self.run.telemetry

    @property
    def trace(self) -> pd.DataFrame:
        return self.run.trace

    def socket_samples(self, side: str | None = None, states: tuple[str, ...] = ("ESTAB",)) -> pd.DataFrame:
        """The ``ss`` samples of ``side``'s connected socket (default: the sender's), in time order."""
        from ..observe.ss import socket_rows

        return socket_rows(self.telemetry, side or self.sender, states)

    def context(self):
        """What the run knows that a capture alone does not, for :func:`~tcplab.analysis.diagnose`."""
        from ..analysis.diagnose import DiagnosisContext

        return DiagnosisContext.of(spec=self.spec, workload=self.workload, app=self.app, counters=self.run.counters)

    @cached_property
    def metrics(self):
        from ..analysis import flow_metrics

        return flow_metrics(self.packets, telemetry=self.telemetry)

    @cached_property
    def diagnosis(self):
        """The run's diagnosis, its sentences in the page's language (``TCPLAB_LANG``, which
        ``tcplab report --language`` sets for the notebook); the label codes are the same in all."""
        from ..analysis import diagnose
        from ..words import default_language

        return diagnose(self.packets, telemetry=self.telemetry, context=self.context(), language=default_language())

    def row(self) -> dict[str, Any]:
        """One line of a case's results table."""
        sends, receives = self.socket(self.sender), self.socket(self.receiver)
        return {
            "variant": self.label,
            "goodput Mbit/s": self.goodput_bps / 1e6,
            "duration s": self.duration_s,
            # getsockopt right after connect: an autotuned buffer grows later, as ss shows.
            "sender SO_SNDBUF": sends.get("sndbuf"),
            "receiver SO_RCVBUF": receives.get("rcvbuf"),
            "sender tb max (ss)": self._largest(self.sender, "skmem_tb"),
            "receiver rb max (ss)": self._largest(self.receiver, "skmem_rb"),
            "cc": sends.get("cc"),
        }

    def _largest(self, side: str, column: str) -> float:
        # Every sample while data may still flow: an autotuned buffer grows on after the sender
        # wrote all and closed (FIN-WAIT-1), as the tables that take a median over these say.
        rows = self.socket_samples(side, states=SENDING_STATES)
        return float(rows[column].max()) if column in rows and not rows.empty else math.nan
