"""How much of case 10's curl download the receive buffer takes in before curl's throttle acts
(not make bench).

Case 10 reads a short download with ``curl --limit-rate`` and scores the shape on the wire:
line-rate bursts between closed windows. That shape needs curl's throttle to act on most of the
file. Receive-buffer autotuning can grow the buffer until it holds most of a short download:
then the window never closes, curl's last (unthrottled) read takes nearly everything, and the
case's shape checks fail although nothing was wrong with the machine. This runs the case's
curl download ``--runs`` times in one lab kernel, with the reader's ``tcp_rmem[2]`` at the
kernel's default or capped (``--cap``, the case's ``tcp_rmem_max``), and records per run the
last backlog, the share of the reading time's 100 ms bins with data on the wire, the smallest
advertised window and the Recv-Q peak.

    flock /tmp/tcplab-heavy.lock .venv/bin/python bench/bench_curl_backlog.py --kernel uml --runs 10
    flock /tmp/tcplab-heavy.lock .venv/bin/python bench/bench_curl_backlog.py --kernel uml --runs 12 --cap 524288
                                 # each writes bench/results/curl-backlog-<kernel>-<cap or default>.json
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from common import RESULTS, save_to, table

from tcplab.cases import CaseLab, buffers, pacing
from tcplab.lab import PathSpec
from tcplab.traffic import Http
from tcplab.units import parse_size

#: Case 10's path and download (its parameters cell, quick profile).
RTT, RATE, CC, LIMIT = "20ms", "100mbit", "cubic", "204800B/s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="host", choices=("host", "uml", "userns"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--size", default="1MB", help="the download (case 10's quick file)")
    parser.add_argument("--cap", default=None, help="the reader's tcp_rmem[2] (default: the kernel's own)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sides = {"client": {"tcp_rmem": buffers.autotuning_cap("--cap", args.cap)}} if args.cap else {}
    spec = PathSpec(rtt=RTT, rate=RATE, cc=CC, side_sysctls=sides)
    file_bytes = parse_size("--size", args.size)
    rows = []
    # Records go to a scratch data folder: these runs are measurements, not the case's replay.
    with tempfile.TemporaryDirectory(prefix="curl-backlog-") as data:
        os.environ["TCPLAB_DATA"] = data
        lab = CaseLab("10-rate-limiting", mode="live", kernel=args.kernel, profile="quick", fresh=True)
        for i in range(args.runs):
            trial = lab.run(f"curl-backlog-{i}", Http(size=args.size, read_rate=LIMIT, cc=CC), path=spec)
            shape = pacing.shape(trial)
            backlog = pacing.last_backlog(trial)
            rows.append({"run": i, "kernel": trial.kernel_name, "reading_s": trial.duration_s,
                         "last_backlog_B": backlog, "backlog_share": backlog / file_bytes,
                         "busy_share": shape["busy_share"],
                         "smallest_window_B": float(pacing.receiver_window(trial)["win"].min()),
                         "recv_q_peak_B": pacing.recv_queue_peak(trial),
                         "disturbed": list(trial.run.observe.get("health", {}).get("disturbed", []))})
            print(table(rows[-1:], COLUMNS).splitlines()[-1] if rows[:-1] else table(rows, COLUMNS), flush=True)
    cap_tag = args.cap or "default"
    out = args.out or RESULTS / f"curl-backlog-{args.kernel}-{cap_tag}.json"
    saved = save_to(out, rows, size=args.size, limit=LIMIT, path={"rtt": RTT, "rate": RATE, "cc": CC},
                    tcp_rmem=sides.get("client", {}).get("tcp_rmem", "the kernel's default"),
                    # Case 10's checks that a buffer holding most of the file breaks.
                    failing_checks={"busy share above 0.6": sum(r["busy_share"] > 0.6 for r in rows),
                                    "smallest window of a full segment or more": sum(r["smallest_window_B"] >= 1448 for r in rows)})
    print(f"→ {saved}")
    return 0


COLUMNS = [("run", "run", "d"), ("reading_s", "reading s", ".2f"), ("last_backlog_B", "last backlog B", ".0f"),
           ("backlog_share", "of file", ".0%"), ("busy_share", "busy share", ".3f"),
           ("smallest_window_B", "min window B", ".0f"), ("recv_q_peak_B", "Recv-Q peak B", ".0f")]

if __name__ == "__main__":
    raise SystemExit(main())
