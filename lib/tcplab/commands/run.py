"""``tcplab run WORKLOAD --set KEY=VALUE …``: one experiment on a fresh path, kept as a run record.

``tcplab run --case 01 --variant sndbuf-16KB`` reruns one variant of a case from its table
(:class:`~tcplab.cases.variants.VariantTable`: this machine's last execution of the case, else
the replay data), with the same parameters, so the case's notebook reuses the run;
``--variants`` lists the table. Every ``--set`` name goes to the parameter set that owns it
(:func:`split_settings`), and every value is checked before a namespace exists.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..experiment import Experiment, ExperimentFailed
from ..lab import NetPath, PathSpec
from ..observe import ObserveSpec
from ..observe.health import reasons_of
from ..runs import Run
from ..units import ParameterError, format_duration, format_rate, format_size
from .common import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM, parse_sets

if TYPE_CHECKING:
    from ..cases.variants import VariantTable

__all__ = ["main", "split_settings", "summary"]


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
    from ..traffic import WORKLOADS

    def rows(title: str, help_rows: list[tuple[str, str, str, str]]) -> list[str]:
        lines = [title]
        for name, default, accepted, text in help_rows:
            lines.append(f"    {name:<14} {text}")
            lines.append(f"    {'':<14} default {default}; {accepted}")
        return lines

    lines = ["usage: tcplab run WORKLOAD [--set KEY=VALUE ...] [--case NAME] [--runs-dir DIR] [--json]",
             "       tcplab run --case CASE --variant LABEL [--set KEY=VALUE ...] [--runs-dir DIR] [--json]",
             "       tcplab run --case CASE --variants", "",
             "Run one workload on a fresh path, capture and sample it, and keep a run record.",
             "With --variant, rerun one variant of a case (01 or 01-send-buffer) with the parameters its",
             "last execution here used (else its replay data's), changed by any --set; --variants lists them.", "",
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
    parser.add_argument("--case", default=None)
    parser.add_argument("--variant", default=None)
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--runs-dir", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    return parser


def summary(run: Run) -> dict[str, Any]:
    """The facts ``tcplab run`` prints, from a run record."""
    from ..traffic import AppResult

    app = AppResult.of_run(run)
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


def main(argv: Sequence[str]) -> int:
    """``tcplab run WORKLOAD --set key=value ... [--json] [--case NAME]``, or a case's variant;
    see :func:`_help_text`."""
    from ..traffic import WORKLOADS

    args = _parser().parse_args(list(argv))
    if args.variant is not None or args.variants:
        if args.workload is not None:
            raise ParameterError("WORKLOAD", args.workload, "none with --variant: the variant names its workload")
        table = _table(args.case, args.runs_dir)
        if args.variants:
            print(f"{table.case}: variants indexed in {table.source}")
            print(table.frame().to_string())
            return EXIT_OK
        spec, workload, observe, repetition = _variant(table, args.variant, parse_sets(args.set))
        return _run(spec, workload, observe, table.case, args, repetition=repetition)
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
    return _run(spec, workload, observe, args.case or "adhoc", args)


def _table(case: str | None, runs_dir: str | None) -> "VariantTable":
    from ..cases.variants import VariantTable
    from ..course import available_cases, cases_named

    cases = available_cases()
    match = cases_named(case, cases) if case is not None else []
    if len(match) != 1:
        raise ParameterError("--case", case, "a case number or name: " + ", ".join(cases))
    return VariantTable.latest(match[0], runs_dir=runs_dir)


def _variant(table: "VariantTable", label: str, sets: Mapping[str, str]) -> tuple[PathSpec, Any, ObserveSpec, int]:
    """The variant's parameter sets as recorded, with ``sets`` applied, each checked against
    this machine (a recorded set skipped that check: it may come from another kernel)."""
    if label not in table.labels:
        raise ParameterError("--variant", label, "one of " + ", ".join(table.labels))
    from ..traffic import Workload

    run = table.run_of(label)
    workload = Workload.of_run(run)
    path_settings, workload_settings, observe_settings = split_settings(type(workload), sets)
    return (PathSpec.of_run(run).replaced(**path_settings), workload.replaced(**workload_settings),
            ObserveSpec.of_run(run).replaced(**observe_settings), int(run.params.get("repetition", 1)))


def _run(spec: PathSpec, workload: Any, observe: ObserveSpec, case: str, args: argparse.Namespace, *,
         repetition: int = 1) -> int:
    try:
        with NetPath(spec) as path:
            run = Experiment(path, workload, case=case, runs_dir=args.runs_dir, observe=observe,
                             repetition=repetition).run()
        code = EXIT_OK
    except ExperimentFailed as exc:
        run, code = exc.run, EXIT_PROBLEM
    facts = summary(run)
    print(json.dumps(facts, indent=2) if args.json else _summary_line(facts))
    if code != EXIT_OK and not args.json:
        print(f"tcplab run: {run.error} (logs in {run.dir / 'logs'})", file=sys.stderr)
    return code
