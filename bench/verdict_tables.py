"""The tables of docs/diagnosis-accuracy.md from the corpus's result files: per vantage point,
right / wrong / undetermined against the goals and the agreement with the kernel, then one
confusion matrix (built label × verdict) per vantage point.

    .venv/bin/python bench/verdict_tables.py bench/results/verdicts.json [more results …]

Each file is one lab setting (kernel, offloads); its tables are headed by it, with the date and
the command of the run behind it. Nothing is measured here.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from bench_verdicts import KERNEL_CLASS, QUALIFIED, UNDETERMINED, VANTAGES, counted, matrices, right

#: What a vantage point cannot tell by design (docs/diagnosis-accuracy.md): the causes whose
#: "undetermined" there is the answer, left out of the second figure of "right".
CANNOT_TELL = {"receiver": ("sender-buffer-limited", "paced-application")}
#: The goals of issue 41: right at least, wrong below.
GOALS = {"sender": (0.97, 0.02), "sender+run": (0.97, 0.02), "receiver": (0.90, 0.02), "router": (0.95, 0.02)}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _goal(vantage: str, s: dict) -> str:
    right, wrong = GOALS[vantage]
    met = [f"≥ {100 * right:.0f} % right: " + ("met" if s["right"] >= right else "**not met**"),
           f"< {100 * wrong:.0f} % wrong: " + ("met" if s["wrong"] < wrong else "**not met**")]
    return "; ".join(met)


def summary_table(summary: dict) -> list[str]:
    out = ["| vantage point | captures | right | wrong | undetermined | agrees with the kernel | goal |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in VANTAGES:
        if v in summary:
            s = summary[v]
            out.append(f"| {v} | {s['captures']} | {_pct(s['right'])} | {_pct(s['wrong'])} | {_pct(s['undetermined'])} "
                       f"| {_pct(s['kernel_agreement'])} of {s['kernel_judged']} | {_goal(v, s)} |")
    return out


def tellable_line(rows: list[dict], vantage: str) -> str:
    """Right over the causes the vantage point can tell apart (:data:`CANNOT_TELL` left out)."""
    left_out = CANNOT_TELL.get(vantage)
    if not left_out:
        return ""
    mine = [r for r in counted(rows, vantage) if r.get("cause", r["label"]) not in left_out]
    good = sum(right(r["verdict"], r["label"]) for r in mine)
    wrong = sum(not right(r["verdict"], r["label"]) and r["verdict"] != UNDETERMINED for r in mine)
    return (f"Without the causes it cannot tell ({', '.join(left_out)}), the {vantage} is right on {_pct(good / len(mine))} "
            f"and wrong on {_pct(wrong / len(mine))} of {len(mine)} captures.")


def kernel_confirmed_line(rows: list[dict]) -> list[str]:
    """Per vantage point, right and wrong over the runs whose kernel account names the built limit."""
    out = []
    for v in VANTAGES:
        mine = [r for r in counted(rows, v)
                if r.get("kernel_limit") == KERNEL_CLASS.get(r["label"].split(QUALIFIED)[0])]
        if mine:
            good = sum(right(r["verdict"], r["label"]) for r in mine)
            wrong = sum(not right(r["verdict"], r["label"]) and r["verdict"] != UNDETERMINED for r in mine)
            out.append(f"{v} {_pct(good / len(mine))} right, {_pct(wrong / len(mine))} wrong of {len(mine)}")
    return out


def kernel_table(rows: list[dict], vantage: str) -> list[str]:
    """The kernel's limit (rows) × the verdict's class (columns), counts."""
    mine = [r for r in counted(rows, vantage) if r.get("kernel_limit")]
    classes = ("sndbuf", "rwnd", "idle", "busy")

    def klass(verdict: str) -> str:
        return KERNEL_CLASS.get(verdict.split(QUALIFIED)[0], verdict)

    columns = [*classes, UNDETERMINED]
    out = ["| kernel \\ verdict | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    for k in classes:
        cells = []
        for c in columns:
            n = sum(1 for r in mine if r["kernel_limit"] == k and klass(r["verdict"]) == c)
            cells.append("" if not n else (f"**{n}**" if c == k else str(n)))
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return out


def confusion_table(rows: list[dict], vantage: str) -> list[str]:
    """Built label (rows) × verdict (columns), counts; right ones in bold."""
    mine = counted(rows, vantage)
    labels = sorted({r["label"] for r in mine})
    verdicts = sorted({r["verdict"] for r in mine}, key=lambda v: (v == UNDETERMINED, v))
    short = {v: v.replace(QUALIFIED + "standing-queue", " +queue") for v in verdicts}
    out = ["| built \\ verdict | " + " | ".join(short[v] for v in verdicts) + " |",
           "| --- |" + " --- |" * len(verdicts)]
    for label in labels:
        cells = []
        for v in verdicts:
            n = sum(1 for r in mine if r["label"] == label and r["verdict"] == v)
            cells.append("" if not n else (f"**{n}**" if v == label else str(n)))
        out.append(f"| {short.get(label, label.replace(QUALIFIED + 'standing-queue', ' +queue'))} | " + " | ".join(cells) + " |")
    return out


def same_verdicts(off: list[dict], on: list[dict]) -> list[str]:
    """How many captures got the same verdict in two results of one corpus (offloads off, on):
    matched by cause, round trip, rate, congestion control and vantage point (the first run of
    each), both counted in their matrices."""
    def key(r: dict) -> tuple:
        return r.get("cause", r["label"]), r["rtt_ms"], r["rate_mbit"], r["cc"], r["vantage"]

    first: dict[tuple, dict] = {}
    for r in (r for v in VANTAGES for r in counted(off, v)):
        first.setdefault(key(r), r)
    pairs = [(first[key(r)], r) for r in (r for v in VANTAGES for r in counted(on, v)) if key(r) in first]
    same = sum(a["verdict"] == b["verdict"] for a, b in pairs)
    # Different verdicts, each right for its own run: the runs differed (a queue stood in one).
    both_right = sum(a["verdict"] != b["verdict"] and right(a["verdict"], a["label"]) and right(b["verdict"], b["label"])
                     for a, b in pairs)
    out = [f"{same} of {len(pairs)} captures got the same verdict with offloads on as off ({_pct(same / len(pairs))}); "
           f"{both_right} more got a different verdict that is right for each run (the kernel's round trip shows a "
           f"standing queue in one run and not in the other). The rest:"]
    differ = Counter((a["verdict"], b["verdict"], k[0]) for a, b in pairs if a["verdict"] != b["verdict"]
                     and not (right(a["verdict"], a["label"]) and right(b["verdict"], b["label"])) for k in [key(a)])
    out += [f"- {n} × {cause}: {a} (off) → {b} (on)" for (a, b, cause), n in differ.most_common()]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--same", nargs=2, type=Path, metavar=("OFF", "ON"),
                        help="also: how many captures got the same verdict in these two results")
    args = parser.parse_args()
    if args.same:
        off, on = (json.loads(p.read_text())["rows"] for p in args.same)
        print("\n".join(same_verdicts(off, on)) + "\n")
    for path in args.results:
        result = json.loads(path.read_text())
        rows = result["rows"]
        summary = matrices(rows)
        parts = result.get("parts") or [result]
        setting = {(p.get("kernel"), p.get("offloads")) for p in parts}
        when = result.get("rediagnosed") or result["environment"]["time"]
        print(f"### {path.name}: lab kernel {', '.join(str(k) for k, _ in setting)}, offloads "
              f"{', '.join('on' if o else 'off' for _, o in setting)}\n")
        print(f"Measured {result['environment']['time'][:10]} on a host running Linux {result['environment']['kernel']} "
              f"({result['environment']['cpus']} cores); diagnosed {when[:10]}. Commands: "
              + "; ".join(f"`{p.get('command')} --keep DIR`" for p in parts if p.get("command"))
              + (f"; then `bench/bench_verdicts.py --rediagnose …`" if result.get("rediagnosed") else "") + ".\n")
        print("\n".join(summary_table(summary)))
        if "built_vs_kernel" in summary:
            b = summary["built_vs_kernel"]
            print(f"\nThe kernel's own account names the built limit in {_pct(b['agreement'])} of {b['runs']} runs.")
        print("\nOver the runs whose kernel account names the built limit: " + "; ".join(kernel_confirmed_line(rows)) + ".")
        for v in VANTAGES:
            if v in summary and tellable_line(rows, v):
                print("\n" + tellable_line(rows, v))
        for v in VANTAGES:
            if v in summary:
                print(f"\n#### {path.stem}, {v}: built label × verdict\n")
                print("\n".join(confusion_table(rows, v)))
                print(f"\n{path.stem}, {v}: the kernel's limit × the verdict's class\n")
                print("\n".join(kernel_table(rows, v)))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
