"""What every side program shares: JSON configuration in, JSON report out, SIGTERM handled."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable


class Terminated(Exception):
    """SIGTERM arrived: the workload timed out or was stopped."""


@dataclass
class SideReport:
    """One side's account of the run, updated as it goes so a stopped side can still report."""

    ok: bool = True
    error: str | None = None
    socket: dict[str, Any] = field(default_factory=dict)
    sent: int = 0
    received: int = 0
    first_write: float | None = None
    last_write: float | None = None
    #: Seconds spent inside send() calls: waiting for room in the send buffer, and copying.
    send_wait_s: float = 0.0
    first_read: float | None = None
    last_read: float | None = None
    requests: list[dict] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def about_to_write(self) -> None:
        if self.first_write is None:
            self.first_write = time.time()

    def wrote(self, count: int, waited: float = 0.0) -> None:
        self.sent += count
        self.send_wait_s += waited
        self.last_write = time.time()

    def read(self, count: int, when: float) -> None:
        if self.first_read is None:
            self.first_read = when
        self.received += count
        self.last_read = when


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(f"stopped by signal {signal.Signals(signum).name}")


def main(run: Callable[[dict[str, Any], SideReport], None]) -> None:
    """Run ``run(config, report)`` with the configuration from argv; print the report; exit."""
    report = SideReport()
    signal.signal(signal.SIGTERM, _terminate)
    try:
        run(json.loads(sys.argv[1]), report)
    except Terminated as exc:
        report.ok, report.error = False, str(exc)
    except Exception as exc:  # any failure is reported in the JSON, and the traceback kept in the log
        traceback.print_exc()
        report.ok, report.error = False, f"{type(exc).__name__}: {exc}"
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    print(json.dumps(dataclasses.asdict(report)), flush=True)
    sys.exit(0 if report.ok else 1)
