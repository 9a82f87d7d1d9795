"""One experiment: a workload on a live path, watched, and kept as a run record.

::

    with NetPath(rtt="20ms", rate="100mbit") as path:
        run = Experiment(path, Bulk(size="22MB", sndbuf="16KB"), case="01-send-buffer").run()
    run.pcap, run.telemetry, run.params, AppResult.of_run(run), PathSpec.of_run(run)

The order of :meth:`Experiment.run`: check the workload against the host's buffer limits
(nothing has started yet), open the run record, start tracepoints, tcpdump (confirmed
listening) and the ss sampler, launch the workload, wait, stop everything in reverse
order, write what was seen. A workload that fails or times out leaves a record marked
failed, with its logs, and raises :class:`ExperimentFailed` carrying that record.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from .lab import NetPath, PathSpec
from .lab.state import checkpoint
from .observe import Capture, ObserveSpec, SsSampler, Tracepoints, points_for
from .observe.counters import counter_delta, counters_in
from .observe.health import RunHealth, group_run_delay, health_around, judged, reasons_of, wait_share
from .runs import FAILED, Run, RunWriter, environment, find_run, key_of

__all__ = ["Experiment", "ExperimentFailed", "RunPlan", "run_params", "reusable_run", "measured", "FRESH_ENV"]


class ExperimentFailed(RuntimeError):
    """The run did not complete; ``run`` is its record (status failed, logs kept)."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


#: ``FRESH=1`` in the environment: every run is made anew, none reused (``make report FRESH=1``).
FRESH_ENV = "FRESH"


def reusable_run(case: str, key: str, *, fresh: bool = False,
                 runs_dir: str | os.PathLike | None = None) -> Run | None:
    """The reuse rule, in one place: the newest complete run of ``case`` with the parameters
    ``key`` names that the machine did not disturb, unless ``fresh`` or ``FRESH=1`` asks for
    a new one."""
    if fresh or os.environ.get(FRESH_ENV) == "1":
        return None
    earlier = find_run(case, key, runs_dir=runs_dir)
    return None if earlier is None or reasons_of(earlier) else earlier


@contextlib.contextmanager
def _host_cpu_wait(path: Any) -> Iterator[dict[str, float]]:
    """Around the block, how long a UML lab kernel's host processes waited, runnable, for a
    CPU, as a share of the block's time (``["share"]``, set when the block ends; nothing for a
    path on this machine's kernel). Read here on the host: that kernel carries the whole path,
    so while it waits every packet waits."""
    remote = getattr(path, "remote", None)
    pgid = remote.host_pgid if remote is not None else None
    found: dict[str, float] = {}
    waits, start = (group_run_delay(pgid) if pgid else {}), time.monotonic()
    yield found
    if pgid:
        found["share"] = wait_share(waits, group_run_delay(pgid), time.monotonic() - start)


def measured(path: Any, compute: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """``compute()``, a measurement made outside a run record on ``path`` (case 00's ping-pong),
    in the path's own kernel, with the health readings a run takes around it (and a UML
    kernel's wait for a host CPU): the value and the health, judged as a run's would be."""
    remote = getattr(path, "remote", None)
    with _host_cpu_wait(path) as waited:
        if remote is not None:
            value, health = remote.call(lambda: health_around(path, compute))
        else:
            value, health = health_around(path, compute)
    if waited.get("share") is not None and health:
        health = judged(health, uml_cpu_wait_share=waited["share"])
    return value, health


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


@dataclass(frozen=True)
class RunPlan:
    """What a run will be recorded as: its parameters (:func:`run_params`) and their key,
    worked out once, before anything runs, and used for reuse, replay and the record alike."""

    params: Mapping[str, Any]
    key: str

    @classmethod
    def of(cls, spec: PathSpec, workload: Any, observe: ObserveSpec, repetition: int = 1) -> "RunPlan":
        params = run_params(spec, workload, observe, repetition)
        return cls(params, key_of(params))


class Experiment:
    """``workload`` on ``path`` (already up), observed as asked, recorded under ``case``.

    ``capture`` is a capture point (sender, receiver, both, router) or None;
    ``observe`` gives every observation setting at once (an :class:`ObserveSpec`);
    ``plan`` is the :class:`RunPlan` a caller already worked out for these (else made here).
    """

    def __init__(self, path: NetPath, workload: Any, *, case: str = "adhoc", capture: str | None = "sender",
                 telemetry: bool = True, interval: Any = "20ms", tracepoints: bool = True,
                 runs_dir: str | os.PathLike | None = None, observe: ObserveSpec | None = None,
                 repetition: int = 1, plan: RunPlan | None = None) -> None:
        self.path = path
        self.workload = workload
        self.case = case
        self.runs_dir = runs_dir
        self.observe = observe or ObserveSpec(capture=capture or "none", telemetry=telemetry,
                                              interval=interval, tracepoints=tracepoints)
        self.plan = plan or RunPlan.of(path.spec, workload, self.observe, repetition)

    def run(self, *, tries: int = 1) -> Run:
        """Run and record. A run the machine disturbed (``observe.health``) measured the machine:
        with ``tries`` > 1 it is made again, ``tries`` times at most; the last one stands, marked
        disturbed if it was (a page then says "machine too busy")."""
        for _ in range(tries - 1):
            run = self._run_once()
            if not reasons_of(run):
                return run
        return self._run_once()

    def _run_once(self) -> Run:
        if getattr(self.path, "remote", None) is not None:
            # The path lives in a UML kernel: the whole run happens there, its record lands in
            # the same folder (the host's filesystem is that kernel's root) and is read back here,
            # with how long that kernel waited for a host CPU meanwhile.
            with _host_cpu_wait(self.path) as waited:
                run_dir, error = self.path.remote.call(_run_here, self)
            run = Run.load(run_dir)
            if waited.get("share") is not None and "health" in run.observe:
                run.amend_observe("health", judged(run.observe["health"], uml_cpu_wait_share=waited["share"]))
            if error is not None:
                raise ExperimentFailed(error, run)
            return run
        from .lab.sysctl import buffer_limits

        self.workload.check_limits(buffer_limits())
        writer = RunWriter(self.case, self.plan.params, key=self.plan.key, runs_dir=self.runs_dir)
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

        return environment(
            lab_kernel=lab_kernel()["kind"],
            backend=self.path.backend,
            cc=self.path.connection_cc(),
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
            if self.path.spec.drop_bare_acks_to is not None:  # what the router's filter took, read last too
                stack.callback(lambda: observed.__setitem__("middlebox", {
                    "drop_bare_acks_to": self.path.spec.drop_bare_acks_to, "dropped": self.path.dropped_bare_acks()}))
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
        telemetry = late = None
        if (sampler := observed.get("ss")) is not None:
            telemetry = sampler.frame()
            writer.write_table("telemetry.parquet", telemetry)
            writer.observe["telemetry"] = {"tool": "ss", "samples": sampler.sample_count,
                                           "interval_s": sampler.interval, "errors": sampler.errors}
            # Over the workload's own time: a UML kernel starting and stopping programs around
            # it runs them slowly, which the measurement does not see.
            window = (app.start, app.end) if app is not None and None not in (app.start, app.end) else (None, None)
            late = sampler.late_share(*window)
        if (counters := observed.get("counters")) is not None:
            writer.write_json("counters.json", counters)
        if (tracer := observed.get("trace")) is not None:
            writer.write_table("trace.parquet", tracer.frame())
            writer.observe["trace"] = tracer.summary()
        if (health := observed.get("health")) is not None:
            writer.observe["health"] = health.summary(telemetry, late)
        if (middlebox := observed.get("middlebox")) is not None:
            writer.observe["middlebox"] = dict(middlebox)


def _run_here(experiment: Experiment) -> tuple[str, str | None]:
    """Run in this process's kernel (called by a UML kernel's agent): the record's folder, and
    the failure's message if it failed."""
    try:
        return str(experiment.run().dir), None
    except ExperimentFailed as exc:
        return str(exc.run.dir), str(exc)
