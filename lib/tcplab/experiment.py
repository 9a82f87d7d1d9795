"""One experiment: a workload on a live path, watched, and kept as a run record.

::

    with Path(rtt="20ms", rate="100mbit") as path:
        run = Experiment(path, Bulk(size="22MB", sndbuf="16KB"), case="01-send-buffer").run()
    run.pcap, run.telemetry, run.app, run.params

The order of :meth:`Experiment.run`: check the workload against the host's buffer limits
(nothing has started yet), open the run record, start tracepoints, tcpdump (confirmed
listening) and the ss sampler, launch the workload, wait, stop everything in reverse
order, write what was seen. A workload that fails or times out leaves a record marked
failed, with its logs, and raises :class:`ExperimentFailed` carrying that record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from typing import Any, Mapping, Sequence

from .lab import Path, PathSpec
from .lab.state import checkpoint
from .observe import Capture, ObserveSpec, SsSampler, Tracepoints, points_for
from .observe.counters import counter_delta, counters_in
from .observe.health import RunHealth, group_run_delay, judged, reasons_of, wait_share
from .runs import FAILED, Run, RunWriter, environment, find_run, key_of
from .units import ParameterError, format_duration, format_rate, format_size

__all__ = ["Experiment", "ExperimentFailed", "main_run", "run_params", "split_settings"]


class ExperimentFailed(RuntimeError):
    """The run did not complete; ``run`` is its record (status failed, logs kept)."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


def run_params(spec: PathSpec, workload: Any, observe: ObserveSpec, repetition: int = 1) -> dict[str, Any]:
    """What a run record stores as its parameters, and what its key is made of: also computed
    without a live path, so a replayed run can be matched to the parameters that asked for it.
    ``repetition`` tells apart repeated runs of one variant (named only from the second on,
    so a single run's key does not depend on it)."""
    params = {
        "path": spec.to_dict(),
        "workload": {"name": workload.name, **workload.to_dict()},
        "observe": observe.to_dict(),
    }
    if repetition != 1:
        params["repetition"] = repetition
    return params


class Experiment:
    """``workload`` on ``path`` (already up), observed as asked, recorded under ``case``.

    ``capture`` is a capture point (sender, receiver, both, router) or None;
    ``observe`` gives every observation setting at once (an :class:`ObserveSpec`).
    """

    def __init__(self, path: Path, workload: Any, *, case: str = "adhoc", capture: str | None = "sender",
                 telemetry: bool = True, interval: Any = "20ms", tracepoints: bool = True,
                 runs_dir: str | os.PathLike | None = None, observe: ObserveSpec | None = None,
                 repetition: int = 1) -> None:
        self.path = path
        self.repetition = repetition
        self.workload = workload
        self.case = case
        self.runs_dir = runs_dir
        self.observe = observe or ObserveSpec(capture=capture or "none", telemetry=telemetry,
                                              interval=interval, tracepoints=tracepoints)

    def params(self) -> dict[str, Any]:
        return run_params(self.path.spec, self.workload, self.observe, self.repetition)

    @property
    def key(self) -> str:
        return key_of(self.params())

    def previous(self) -> Run | None:
        """The newest complete run of this case with the same parameters, if any."""
        return find_run(self.case, self.key, runs_dir=self.runs_dir)

    def run(self, *, reuse: bool = False) -> Run:
        """Run and record. With ``reuse``, return :meth:`previous` instead when there is one,
        unless the environment says FRESH=1."""
        if reuse and os.environ.get("FRESH") != "1" and (earlier := self.previous()) is not None:
            return earlier
        if getattr(self.path, "remote", None) is not None:
            # The path lives in a UML kernel: the whole run happens there, its record lands in
            # the same folder (the host's filesystem is that kernel's root) and is read back here,
            # with how long that kernel waited for a host CPU meanwhile (read here, on the host).
            kernel = self.path.remote
            pgid = kernel.host_pgid
            waits, start = (group_run_delay(pgid) if pgid else {}), time.monotonic()
            run_dir, error = kernel.call(_run_here, self)
            share = wait_share(waits, group_run_delay(pgid), time.monotonic() - start) if pgid else None
            run = Run.load(run_dir)
            if share is not None and "health" in run.observe:
                run.amend_observe("health", judged(run.observe["health"], uml_cpu_wait_share=share))
            if error is not None:
                raise ExperimentFailed(error, run)
            return run
        from .traffic import host_limits

        self.workload.check_limits(host_limits())
        writer = RunWriter(self.case, self.params(), runs_dir=self.runs_dir)
        writer.environment = self._environment()
        writer.write_json("sysctl.json", self.path.sysctl_snapshot())
        observed: dict[str, Any] = {}
        failure: BaseException | None = None
        try:
            self._observe_and_run(writer, observed)
        except BaseException as exc:
            failure = exc
        try:
            self._keep(writer, observed)
        except Exception as exc:
            failure = failure or exc
        if failure is None:
            return writer.finish()
        writer.write_log("error.log", "".join(traceback.format_exception(failure)))
        run = writer.finish(FAILED, f"{type(failure).__name__}: {failure}")
        if isinstance(failure, Exception):
            raise ExperimentFailed(f"{self.case}/{run.run_id} failed: {failure}", run) from failure
        raise failure  # KeyboardInterrupt, SystemExit: recorded, then passed on unchanged

    def _environment(self) -> dict[str, Any]:
        from .lab.kernels import lab_kernel

        cc_key = "net.ipv4.tcp_congestion_control"
        return environment(
            lab_kernel=lab_kernel()["kind"],
            backend=self.path.backend,
            cc={host.name: host.sysctl(cc_key) for host in (self.path.client, self.path.server)},
            path=self.path.describe(),
        )

    def _observe_and_run(self, writer: RunWriter, observed: dict[str, Any]) -> None:
        from .traffic import WorkloadError

        spec, port = self.observe, self.workload.port
        with contextlib.ExitStack() as stack:
            # The namespaces' TCP counters (nstat), read again last, once everything has stopped.
            hosts = {h.name: h.ns for h in (self.path.client, self.path.server)}
            before = {name: counters_in(ns) for name, ns in hosts.items()}
            stack.callback(lambda: observed.__setitem__("counters", {
                name: counter_delta(before[name], counters_in(ns)) for name, ns in hosts.items()}))
            if spec.tracepoints:
                observed["trace"] = stack.enter_context(Tracepoints(port))
            if spec.capture != "none":
                points = points_for(self.path, spec.capture, self.workload.sender())
                observed["capture"] = stack.enter_context(
                    Capture(points, writer.dir, port, snaplen=spec.snaplen, max_bytes=spec.capture_limit))
                checkpoint("capture-listening")
            if spec.telemetry:
                hosts = {h.name: h.ns for h in (self.path.client, self.path.server)}
                observed["ss"] = stack.enter_context(SsSampler(hosts, port, spec.interval))
            observed["health"] = stack.enter_context(RunHealth(self.path))  # read again once the workload stopped
            running = self.workload.launch(self.path, writer.logdir)
            stack.callback(running.stop)
            checkpoint("mid-transfer")
            try:
                observed["app"] = running.wait()
            except WorkloadError as exc:
                observed["app"] = exc.result
                raise

    @staticmethod
    def _keep(writer: RunWriter, observed: Mapping[str, Any]) -> None:
        """Write what the observers saw, whether or not the workload succeeded."""
        if (app := observed.get("app")) is not None:
            writer.app = app.to_dict()
        if (capture := observed.get("capture")) is not None:
            writer.pcaps = [stat.file for stat in capture.stats]
            writer.observe["capture"] = [stat.to_dict() for stat in capture.stats]
            for label, lines in capture.logs.items():
                writer.write_log(f"tcpdump-{label}.log", "\n".join(lines) + "\n")
        telemetry = None
        if (sampler := observed.get("ss")) is not None:
            telemetry = sampler.frame()
            writer.write_table("telemetry.parquet", telemetry)
            writer.observe["telemetry"] = {"tool": "ss", "samples": sampler.sample_count,
                                           "interval_s": sampler.interval, "errors": sampler.errors}
        if (counters := observed.get("counters")) is not None:
            writer.write_json("counters.json", counters)
        if (tracer := observed.get("trace")) is not None:
            writer.write_table("trace.parquet", tracer.frame())
            writer.observe["trace"] = tracer.summary()
        if (health := observed.get("health")) is not None:
            writer.observe["health"] = health.summary(telemetry)


def _run_here(experiment: Experiment) -> tuple[str, str | None]:
    """Run in this process's kernel (called by a UML kernel's agent): the record's folder, and
    the failure's message if it failed."""
    try:
        return str(experiment.run().dir), None
    except ExperimentFailed as exc:
        return str(exc.run.dir), str(exc)


# --- tcplab run ------------------------------------------------------------------------------------

def split_settings(workload_cls: type, settings: Mapping[str, str]) -> tuple[dict, dict, dict]:
    """``--set`` pairs → (path, workload, observe) settings by parameter name.

    A name both the path and the workload have (``cc``) goes to both: the namespace default
    and the socket option then agree. An unknown name is a :class:`ParameterError` listing
    every accepted one.
    """
    sets = {"path": set(PathSpec.names()), "workload": set(workload_cls.names()),
            "observe": set(ObserveSpec.names())}
    out: dict[str, dict] = {name: {} for name in sets}
    for key, value in settings.items():
        owners = [name for name, names in sets.items() if key in names]
        if not owners:
            accepted = "; ".join(f"{workload_cls.name if n == 'workload' else n} parameters: "
                                 + ", ".join(sorted(sets[n])) for n in sets)
            raise ParameterError(key, value, accepted, "unknown parameter")
        for owner in owners:
            out[owner][key] = value
    return out["path"], out["workload"], out["observe"]


def _help_text() -> str:
    from .traffic import WORKLOADS

    def rows(title: str, help_rows: list[tuple[str, str, str, str]]) -> list[str]:
        lines = [title]
        for name, default, accepted, text in help_rows:
            lines.append(f"    {name:<14} {text}")
            lines.append(f"    {'':<14} default {default}; {accepted}")
        return lines

    lines = ["usage: tcplab run WORKLOAD [--set KEY=VALUE ...] [--case NAME] [--runs-dir DIR] [--json]", "",
             "Run one workload on a fresh path, capture and sample it, and keep a run record.", "",
             "workloads: " + ", ".join(sorted(WORKLOADS)), ""]
    for name in sorted(WORKLOADS):
        cls = WORKLOADS[name]
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        lines += rows(f"{name}: {doc}", cls.help_rows()) + [""]
    lines += rows("path parameters:", PathSpec.help_rows()) + [""]
    lines += rows("observation parameters:", ObserveSpec.help_rows())
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcplab run", add_help=False)
    parser.add_argument("workload", nargs="?")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--case", default="adhoc")
    parser.add_argument("--runs-dir", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    return parser


def summary(run: Run) -> dict[str, Any]:
    """The facts ``tcplab run`` prints, from a run record."""
    app = run.app
    sockets = getattr(app, "sockets", None) or {}
    return {
        "run_dir": str(run.dir), "status": run.status, "error": run.error,
        "goodput_bps": getattr(app, "goodput_bps", None), "duration_s": getattr(app, "duration", None),
        "bytes": getattr(app, "bytes", None),
        "sockets": {side: {k: s.get(k) for k in ("sndbuf_requested", "sndbuf", "rcvbuf_requested", "rcvbuf")}
                    for side, s in sockets.items()},
        "backend": run.environment.get("backend"),
        "cc": {side: s.get("cc") for side, s in sockets.items()} or run.environment.get("cc"),
        "disturbed": reasons_of(run),
    }


def _summary_line(facts: Mapping[str, Any]) -> str:
    def size(value: Any) -> str:
        return "?" if value is None else format_size(value)

    goodput = "?" if facts["goodput_bps"] is None else format_rate(facts["goodput_bps"])
    duration = "?" if facts["duration_s"] is None else format_duration(facts["duration_s"])
    buffers = ", ".join(f"{side} sndbuf {size(s.get('sndbuf'))} rcvbuf {size(s.get('rcvbuf'))}"
                        for side, s in facts["sockets"].items())
    cc = ", ".join(f"{side} {cc}" for side, cc in (facts["cc"] or {}).items())
    machine = "; machine disturbed the run: " + "; ".join(facts["disturbed"]) if facts["disturbed"] else ""
    return (f"{facts['status']}: goodput {goodput} in {duration}; {buffers}; backend {facts['backend']}; "
            f"cc {cc}{machine}; {facts['run_dir']}")


def main_run(argv: Sequence[str]) -> int:
    """``tcplab run WORKLOAD --set key=value ... [--json] [--case NAME]``; see :func:`_help_text`."""
    from .cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM, parse_sets
    from .traffic import WORKLOADS

    args = _parser().parse_args(list(argv))
    if args.help or args.workload is None:
        print(_help_text(), file=sys.stdout if args.help else sys.stderr)
        return EXIT_OK if args.help else EXIT_BAD_INPUT
    if args.workload not in WORKLOADS:
        raise ParameterError("WORKLOAD", args.workload, "one of " + ", ".join(sorted(WORKLOADS)))
    cls = WORKLOADS[args.workload]
    path_settings, workload_settings, observe_settings = split_settings(cls, parse_sets(args.set))
    # Every parameter is checked before a namespace exists.
    spec = PathSpec.from_settings(path_settings)
    workload = cls.from_settings(workload_settings)
    observe = ObserveSpec.from_settings(observe_settings)
    try:
        with Path(spec) as path:
            run = Experiment(path, workload, case=args.case, runs_dir=args.runs_dir, observe=observe).run()
        code = EXIT_OK
    except ExperimentFailed as exc:
        run, code = exc.run, EXIT_PROBLEM
    facts = summary(run)
    print(json.dumps(facts, indent=2) if args.json else _summary_line(facts))
    if code != EXIT_OK and not args.json:
        print(f"tcplab run: {run.error} (logs in {run.dir / 'logs'})", file=sys.stderr)
    return code
