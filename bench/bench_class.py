"""A class on one machine: N learners run a case live at the same moment (not make bench).

Each learner is a system user of their own (tcplab-learner1 … N, made here where missing, as
root) running ``tcplab report --cases CASE --mode live --kernel KERNEL --exercises skip
--formats html`` from this checkout, all started together, for N = 1, 2, 4, 8 and for each
lab kernel a learner without root has (``userns``: the host's kernel in their own user
namespace; ``uml``: a User-mode Linux kernel each). Their measurements take turns in the
machine-wide queue, so the class's wall time grows with N; what must not happen is a wrong
check: each learner's case passes, or says the machine was too busy to trust it.

Recorded per learner: wall time, exit code and the case's status and checks
(``summary.json``), and the peak memory of their lab (PSS of the lab's processes: for userns
the user namespace's processes — unshare, the agent, delay lines, tcpdump, the workload; for
UML the kernel's host processes) and of everything they ran (the report, papermill, the
notebook's kernel, the lab). Saved in ``bench/results/class.json``; docs/deploying.md turns it
into the size of a server for a class.

    flock /tmp/tcplab-heavy.lock .venv/bin/python bench/bench_class.py [--learners 1,2,4,8] [--kernels userns,uml]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import RESULTS, save_to, table

ROOT = Path(__file__).resolve().parents[1]
TCPLAB = Path(sys.executable).with_name("tcplab")
#: Exit codes of ``tcplab report`` that are right answers: every check held (0), or none failed
#: and the machine was too busy to trust some (4). 1 is a failed check: a wrong one.
RIGHT = {0: "pass", 4: "busy"}


def learner(i: int) -> pwd.struct_passwd:
    name = f"tcplab-learner{i}"
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", "tcplab learner", name],
                       check=True)
        print(f"  made the system user {name}", file=sys.stderr)
        return pwd.getpwnam(name)


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _is_lab_root(cmdline: str) -> bool:
    """The first process of a learner's lab: the user namespace's unshare, or the UML kernel's
    watchdog (tcplab.lab.shepherd), below which every process of that lab runs."""
    return cmdline.startswith("unshare --user") or "tcplab/lab/shepherd.py" in cmdline


class MemorySampler(threading.Thread):
    """Every ``interval`` s: per uid, the PSS of all their processes and of their lab's; the peaks."""

    def __init__(self, uids: set[int], interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.uids, self.interval = uids, interval
        self.peak_all = {u: 0 for u in uids}
        self.peak_lab = {u: 0 for u in uids}
        self._halt = threading.Event()  # not _stop: threading.Thread has a method of that name

    def sample(self) -> None:
        parents, owners, labs = {}, {}, set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            fields = _stat(pid)
            if fields is None:
                continue
            try:
                uid = os.stat(f"/proc/{pid}").st_uid
            except OSError:
                continue
            parents[pid], owners[pid] = int(fields[1]), uid
            if uid in self.uids and _is_lab_root(_cmdline(pid)):
                labs.add(pid)
        totals = {u: 0 for u in self.uids}
        lab_totals = {u: 0 for u in self.uids}
        for pid, uid in owners.items():
            if uid not in self.uids:
                continue
            pss = _pss_kb(pid)
            totals[uid] += pss
            ancestor = pid
            while ancestor > 1:
                if ancestor in labs:
                    lab_totals[uid] += pss
                    break
                ancestor = parents.get(ancestor, 0)
        for uid in self.uids:
            self.peak_all[uid] = max(self.peak_all[uid], totals[uid])
            self.peak_lab[uid] = max(self.peak_lab[uid], lab_totals[uid])

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def one_class(kernel: str, n: int, case: str, out: Path, queue_wait: int, sitting: int = 1) -> list[dict]:
    """N learners at once, the ``sitting``-th class of N on this kernel; one row per learner."""
    accounts = [learner(i) for i in range(1, n + 1)]
    runs = []
    for account in accounts:
        reports = out / f"{kernel}-{n}-{sitting}" / account.pw_name
        reports.mkdir(parents=True)
        shutil.chown(reports, account.pw_uid, account.pw_gid)
        runs.append((account, reports))
    sampler = MemorySampler({a.pw_uid for a in accounts})
    sampler.start()
    started = time.monotonic()
    processes = []
    for account, reports in runs:
        argv = ["runuser", "-u", account.pw_name, "--", "env", f"HOME={account.pw_dir}",
                f"TCPLAB_QUEUE_WAIT={queue_wait}", str(TCPLAB), "report", "--cases", case, "--mode", "live",
                "--kernel", kernel, "--exercises", "skip", "--formats", "html", "--fresh", "--reports-dir", str(reports)]
        log = (reports / "report.log").open("w")
        processes.append((account, reports, subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT),
                          time.monotonic(), log))
    rows = []
    for account, reports, process, began, log in processes:
        code = process.wait()
        took = time.monotonic() - began
        log.close()
        try:
            summary = json.loads((reports / "summary.json").read_text())
            entry = summary["cases"][0]
            status = entry["status"]
            checks = [(c.get("name"), c.get("passed")) for c in entry.get("checks", [])]
            # A wrong verdict must be explainable from the result file: what failed, by how much,
            # and what the learner's runs said of the machine (a run it judged disturbed is "busy").
            failed = [{k: c.get(k) for k in ("name", "measured", "predicted", "rule")}
                      for c in entry.get("checks", []) if c.get("passed") is False]
            machine = entry.get("machine")
        except (OSError, ValueError, KeyError, IndexError):
            status, checks, failed, machine = "no summary", [], [], None
        rows.append({"kernel": kernel, "learners": n, "sitting": sitting, "learner": account.pw_name, "exit": code,
                     "outcome": RIGHT.get(code, "WRONG" if code == 1 else f"error {code}"), "status": status,
                     "checks": len(checks), "checks_failed": sum(1 for _, ok in checks if ok is False),
                     "wall_s": round(took, 1), **({"failed": failed, "machine": machine} if failed else {})})
    class_wall = time.monotonic() - started
    sampler.stop()
    for row, (account, _, _, _, _) in zip(rows, processes):
        row["class_wall_s"] = round(class_wall, 1)
        row["lab_peak_pss_mb"] = round(sampler.peak_lab[account.pw_uid] / 1024, 1)
        row["learner_peak_pss_mb"] = round(sampler.peak_all[account.pw_uid] / 1024, 1)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", default="1,2,4,8")
    parser.add_argument("--kernels", default="userns,uml")
    parser.add_argument("--case", default="00")
    parser.add_argument("--queue-wait", type=int, default=1800,
                        help="TCPLAB_QUEUE_WAIT of each learner: seconds a measurement waits for its turn")
    parser.add_argument("--keep", action="store_true", help="keep the learners' reports and logs")
    parser.add_argument("--out", type=Path, default=RESULTS / "class.json",
                        help="result file (default: %(default)s); reruns go beside it, e.g. class-8-reruns.json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_class runs learners as system users of their own: run it as root", file=sys.stderr)
        return 3
    out = Path(tempfile.mkdtemp(prefix="tcplab-class-"))
    out.chmod(0o755)
    rows: list[dict] = []
    try:
        for kernel in args.kernels.split(","):
            sittings: dict[int, int] = {}  # --learners 8,8,8: three classes of eight, one after another
            for n in (int(x) for x in args.learners.split(",")):
                sittings[n] = sittings.get(n, 0) + 1
                print(f"{kernel}: {n} learner(s) at once", file=sys.stderr)
                batch = one_class(kernel, n, args.case, out, args.queue_wait, sittings[n])
                rows += batch
                print("  " + ", ".join(f"{r['learner']} {r['outcome']} {r['wall_s']:.0f} s lab {r['lab_peak_pss_mb']:.0f} MB"
                                       for r in batch), file=sys.stderr)
    finally:
        if args.keep:
            print(f"reports and logs kept in {out}", file=sys.stderr)
        else:
            shutil.rmtree(out, ignore_errors=True)
    classes = []
    for kernel in args.kernels.split(","):
        for n, sitting in sorted({(r["learners"], r["sitting"]) for r in rows if r["kernel"] == kernel}):
            batch = [r for r in rows if r["kernel"] == kernel and r["learners"] == n and r["sitting"] == sitting]
            classes.append({"kernel": kernel, "learners": n, "sitting": sitting, "class_wall_s": batch[0]["class_wall_s"],
                            "learner_wall_s_max": max(r["wall_s"] for r in batch),
                            "passed": sum(r["outcome"] == "pass" for r in batch),
                            "busy": sum(r["outcome"] == "busy" for r in batch),
                            "wrong_or_error": sum(r["outcome"] not in ("pass", "busy") for r in batch),
                            "lab_peak_pss_mb_max": max(r["lab_peak_pss_mb"] for r in batch),
                            "learner_peak_pss_mb_max": max(r["learner_peak_pss_mb"] for r in batch)})
    print(table(classes, [("kernel", "kernel", ""), ("learners", "N", "d"), ("sitting", "sitting", "d"),
                          ("class_wall_s", "class wall s", ".0f"),
                          ("learner_wall_s_max", "slowest learner s", ".0f"), ("passed", "pass", "d"),
                          ("busy", "busy", "d"), ("wrong_or_error", "wrong/error", "d"),
                          ("lab_peak_pss_mb_max", "lab MB (max)", ".0f"),
                          ("learner_peak_pss_mb_max", "learner MB (max)", ".0f")]))
    path = save_to(args.out, rows, classes=classes, case=args.case,
                command=" ".join(["bench/bench_class.py", *sys.argv[1:]]))
    print(f"saved {path}")
    return 0 if all(c["wrong_or_error"] == 0 for c in classes) else 1


if __name__ == "__main__":
    sys.exit(main())
