"""Pcap engine: packets per second and memory per packet against tshark (make bench).

    .venv/bin/python bench/bench_pcap.py [--packets N] [--out bench/results/pcap.json]

On a synthetic capture of >= 1 M TCP packets (bulk transfers with loss, fast
retransmissions, SACK-carrying duplicate ACKs, zero windows, Linux-style window probes
and window updates, 96-byte snaplen, many flows interleaved), it times
``read_packets`` (decode + Wireshark expert analysis + DataFrame) and
``tshark -T fields`` producing the same columns, measures the peak memory of each in a
fresh process, and counts the rows where the two disagree.

Goals: >= 1 M packets/s end to end and >= 30x tshark, <= 600 bytes of peak memory per
packet, no row that differs from tshark. The capture is cached outside the repository
(``$XDG_CACHE_HOME/tcplab/bench``) so later runs skip making it.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import CHILD_TIMER, RESULTS, save_to, table

SNAPLEN = 96
MSS = 1448
WSCALE = 7
M32 = 0xFFFFFFFF
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
GOALS = {"packets_per_s": 1_000_000, "speedup": 30, "bytes_per_packet": 600, "mismatched_rows": 0}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tcplab" / "bench"
GENERATOR_VERSION = 1  # bump when the capture's contents change, to remake cached files


# ---------------------------------------------------------------- one simulated transfer


def simulate(seed: int, segments: int):
    """A bulk upload seen at the sender: (time s, dir, rel seq, rel ack, flags, raw window,
    payload length, option bytes) per packet, in time order.

    The sender keeps a window of segments in flight, the network loses some after the
    capture point, the receiver ACKs every second segment and answers holes with
    duplicate ACKs carrying SACK blocks; three duplicates trigger a fast retransmission,
    a lost tail a timeout. Now and then the receiving application stalls: the window
    closes, the sender probes it as Linux does, and a window update reopens it.
    """
    rnd = random.Random(seed)
    rtt = rnd.choice([0.0004, 0.002, 0.01, 0.04])
    gap = rnd.choice([12e-6, 120e-6])  # 1 Gbit/s or 100 Mbit/s of 1448-byte segments
    loss = rnd.choice([0.003, 0.01, 0.03])
    stall_every = rnd.randrange(400, 900) * MSS
    total = segments * MSS
    tsv = [rnd.randrange(2**31), rnd.randrange(2**31)]
    out = []

    def ts_opt(d, t):
        return b"\x01\x01" + struct.pack("!BBII", 8, 10, (tsv[d] + int(t * 1000)) & M32,
                                         (tsv[1 - d] + int(t * 1000)) & M32)

    def emit(t, d, seq, ack, flags, win, length=0, extra=b""):
        out.append((t, d, seq, ack, flags, min(win, 0xFFFF), length, ts_opt(d, t) + extra))

    syn_opts = struct.pack("!BBH", 2, 4, 1460) + b"\x04\x02"
    ws_opt = b"\x01\x03\x03" + bytes([WSCALE])
    out.append((0.0, 0, 0, 0, SYN, 64240, 0, syn_opts + ts_opt(0, 0)[2:] + ws_opt))
    out.append((rtt, 1, 0, 1, SYN | ACK, 65160, 0, syn_opts + ts_opt(1, rtt)[2:] + ws_opt))
    t0 = rtt + 1e-6
    emit(t0, 0, 1, 1, ACK, 502)

    bufsize = 3 << 20
    events = []  # (time, order, kind, data)
    order = 0

    def push(t, kind, data=None):
        nonlocal order
        order += 1
        heapq.heappush(events, (t, order, kind, data))

    # sender
    una = nxt = 0
    cwnd = 10
    dup = 0
    recover = -1
    rwnd = bufsize
    free_at = t0 + 1e-6
    last_progress = free_at
    probing = False
    last_win = -1
    # receiver
    rcv = 0
    ooo: list[list[int]] = []
    pending = 0
    stalled = False
    used = 0
    next_stall = stall_every

    def rwin():
        return max(0, (bufsize if not stalled else 65536) - used) >> WSCALE

    def send(t, seq, length):
        emit(t, 0, 1 + seq, 1, ACK | PSH, 502, length)
        if rnd.random() >= loss:
            push(t + rtt / 2, "rx", (seq, length))

    while una < total:
        window = min(cwnd * MSS, rwnd)
        ready = nxt < total and nxt - una + MSS <= window
        t_next = events[0][0] if events else float("inf")
        if ready and free_at <= t_next:
            length = min(MSS, total - nxt)
            send(free_at, nxt, length)
            nxt += length
            free_at += gap
            continue
        if not events:  # everything in flight was lost: retransmission timeout
            t = max(free_at, last_progress + 0.2)
            send(t, una, min(MSS, total - una))
            free_at = t + gap
            last_progress = t
            continue
        t, _, kind, data = heapq.heappop(events)
        if kind == "rx":  # at the receiver
            seq, length = data
            if seq == rcv:
                rcv += length
                while ooo and ooo[0][0] <= rcv:
                    rcv = max(rcv, ooo.pop(0)[1])
                pending += 1
                immediate = bool(ooo) or pending >= 2
            elif seq > rcv:
                for block in ooo:
                    if block[0] <= seq + length and seq <= block[1]:
                        block[0], block[1] = min(block[0], seq), max(block[1], seq + length)
                        break
                else:
                    ooo.append([seq, seq + length])
                    ooo.sort()
                immediate = True
            else:
                immediate = True
            if stalled:
                used += length
            elif rcv >= next_stall:
                stalled, used = True, 0
                next_stall += stall_every
                push(t + rnd.uniform(0.3, 0.9), "unstall")
            if immediate:
                pending = 0
                sack = b""
                if ooo:
                    blocks = sorted(ooo, key=lambda b: not (b[0] <= seq < b[1]))[:3]
                    sack = b"\x01\x01" + struct.pack("!BB", 5, 2 + 8 * len(blocks)) + b"".join(
                        struct.pack("!II", 1 + s, 1 + e) for s, e in blocks)
                push(t + rtt / 2, "ack", (rcv, rwin(), sack))
        elif kind == "ack":  # back at the sender, where the capture is
            ack, win, sack = data
            emit(t, 1, 1, 1 + ack, ACK, win, 0, sack)
            rwnd = win << WSCALE
            same_window = win == last_win
            last_win = win
            if ack > una:
                una = ack
                dup = 0
                last_progress = t
                cwnd = min(cwnd + 1, 300)
                if una < recover:  # partial ACK: the next hole
                    send(max(t, free_at), una, min(MSS, total - una))
                    free_at = max(t, free_at) + gap
            elif ack == una and nxt > una and same_window:
                dup += 1
                if dup == 3 and una >= recover:
                    recover = nxt
                    cwnd = max(cwnd // 2, 2)
                    send(max(t, free_at) + 1e-6, una, min(MSS, total - una))
                    free_at = max(t, free_at) + 1e-6 + gap
            if rwnd == 0 and not probing:
                probing = True
                push(t + 0.2, "probe", 0.2)
            if rwnd:
                probing = False
            free_at = max(free_at, t)
        elif kind == "probe":
            if rwnd == 0:
                emit(t, 0, 1 + una - 1, 1, ACK, 502)  # Linux: one byte below the window, no data
                push(t + rtt, "ack", (rcv, rwin(), b""))
                push(t + 2 * data, "probe", 2 * data)
            else:
                probing = False
        elif kind == "unstall":
            stalled, used = False, 0
            push(t + rtt / 2, "ack", (rcv, rwin(), b""))  # window update
    tf = max(free_at, out[-1][0]) + 1e-4
    emit(tf, 0, 1 + total, 1 + rcv, FIN | ACK, 502)
    emit(tf + rtt, 1, 1, 2 + total, FIN | ACK, rwin())
    emit(tf + rtt + 1e-5, 0, 2 + total, 2, ACK, 502)
    out.sort(key=lambda r: r[0])
    return out


# ---------------------------------------------------------------- the capture file


def template(seed: int, segments: int):
    """Records of one transfer, split around the TCP ports so copies can get new ones."""
    isn = (random.Random(seed * 7919).randrange(2**32), random.Random(seed * 104729).randrange(2**32))
    client = bytes([10, 1, seed & 0xFF, 1 + (seed >> 8) % 250])
    server = bytes([10, 2, 0, 1])
    recs = []
    for t, d, seq, ack, flags, win, length, opts in simulate(seed, segments):
        opts += b"\x00" * (-len(opts) % 4)
        hlen = 20 + len(opts)
        raw_seq = (isn[d] + seq) & M32
        raw_ack = (isn[1 - d] + ack) & M32 if flags & ACK else 0
        tcp_rest = struct.pack("!IIBBHHH", raw_seq, raw_ack, (hlen // 4) << 4, flags, win, 0, 0) + opts
        total = 20 + hlen + length
        src, dst = (client, server) if d == 0 else (server, client)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
        csum = _ip_checksum(ip)
        ip = ip[:10] + struct.pack("!H", csum) + ip[12:]
        eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
        pre = eth + ip
        post = tcp_rest + b"\x00" * length
        cap = min(SNAPLEN, len(pre) + 4 + len(post))
        recs.append((int(round(t * 1e6)), pre, post[:cap - len(pre) - 4], d, len(pre) + 4 + len(post), cap))
    return recs


def _ip_checksum(hdr: bytes) -> int:
    s = sum(struct.unpack("!10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def make_capture(path: Path, packets: int, concurrency: int = 48) -> dict:
    """Copies of a handful of transfers, each copy its own flow (client port), started
    staggered so that ``concurrency`` of them interleave at any time."""
    templates = [template(seed, 2500) for seed in range(8)]
    times, which, index = [], [], []
    n = copies = 0
    while n < packets:
        tpl = templates[copies % len(templates)]
        duration = tpl[-1][0]
        offset = (copies // concurrency) * duration + (copies % concurrency) * (duration // concurrency + 1)
        times.append(np.array([r[0] for r in tpl], np.int64) + offset)
        which.append(np.full(len(tpl), copies, np.int64))
        index.append(np.arange(len(tpl)))
        n += len(tpl)
        copies += 1
    times_a, which_a, index_a = np.concatenate(times), np.concatenate(which), np.concatenate(index)
    order = np.argsort(times_a, kind="stable")
    base_us = 1_700_000_000 * 1_000_000
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, 1))
        buf = []
        for i in order.tolist():
            k = int(which_a[i])
            t_us, pre, post, d, orig, cap = templates[k % len(templates)][int(index_a[i])]
            port = 1024 + k % 60000
            ports = struct.pack("!HH", port, 5001) if d == 0 else struct.pack("!HH", 5001, port)
            ts = base_us + int(times_a[i])
            buf.append(struct.pack("<IIII", ts // 1_000_000, ts % 1_000_000, cap, orig) + pre + ports + post)
            if len(buf) >= 65536:
                fh.write(b"".join(buf))
                buf.clear()
        fh.write(b"".join(buf))
    os.replace(tmp, path)
    return {"packets": int(n), "flows": copies}


# ---------------------------------------------------------------- measurements

_ENGINE = r"""
import gc, json, resource, sys, time, tracemalloc
from tcplab.analysis import read_packets, analyze
path, warm, mode = sys.argv[1], sys.argv[2], sys.argv[3]
read_packets(warm)  # load the compiled code (numba's cache) before measuring
gc.collect()
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()
if mode == "time":
    best = {"total": 1e9, "decode": 1e9, "analyze": 1e9}
    for _ in range(3):
        t0 = time.perf_counter(); table = read_packets(path); t1 = time.perf_counter()
        best["total"] = min(best["total"], t1 - t0)
        del table; gc.collect()
        t0 = time.perf_counter(); plain = read_packets(path, expert=False); t1 = time.perf_counter()
        analyze(plain); t2 = time.perf_counter()
        best["decode"] = min(best["decode"], t1 - t0); best["analyze"] = min(best["analyze"], t2 - t1)
        del plain; gc.collect()
    print(json.dumps(best))
else:
    before = rss()
    tracemalloc.start()
    table = read_packets(path)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"rss_peak_delta": peak - before, "traced_peak": traced, "packets": len(table.packets),
                      "frames": table.source.frames, "table_bytes": int(table.packets.memory_usage(deep=True).sum())}))
"""


def run_engine(path: Path, warm: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _ENGINE, str(path), str(warm), mode], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_tshark(path: Path, out: Path) -> dict:
    from tcplab.analysis import _tshark

    res = subprocess.run([sys.executable, "-c", CHILD_TIMER, str(out), *_tshark.command(str(path))],
                         capture_output=True, text=True, check=True)
    code, seconds, peak = res.stdout.split()
    if int(code) != 0:
        raise RuntimeError(f"tshark exited with {code}")
    return {"seconds": float(seconds), "rss_peak": int(peak)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=1_000_000, help="at least this many TCP packets")
    parser.add_argument("--out", type=Path, default=RESULTS / "pcap.json")
    parser.add_argument("--no-tshark", action="store_true", help="skip tshark (no speed-up or mismatch count)")
    parser.add_argument("--remake", action="store_true", help="make the capture again even if cached")
    args = parser.parse_args()

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"bench-v{GENERATOR_VERSION}-{args.packets}.pcap"
    meta_path = path.with_suffix(".json")
    if args.remake or not path.exists() or not meta_path.exists():
        start = time.perf_counter()
        meta = make_capture(path, args.packets)
        meta_path.write_text(json.dumps(meta))
        print(f"made {path} ({meta['packets']} packets, {meta['flows']} flows) in "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    meta = json.loads(meta_path.read_text())
    warm = CACHE / f"warm-v{GENERATOR_VERSION}.pcap"
    if not warm.exists():
        make_capture(warm, 2000)

    timing = run_engine(path, warm, "time")
    memory = run_engine(path, warm, "memory")
    n = memory["packets"]
    ours = {
        "tool": "tcplab read_packets", "packets": n, "seconds": timing["total"],
        "decode_s": timing["decode"], "analyze_s": timing["analyze"],
        "packets_per_s": n / timing["total"], "peak_bytes": memory["rss_peak_delta"],
        "bytes_per_packet": memory["rss_peak_delta"] / n, "traced_bytes_per_packet": memory["traced_peak"] / n,
        "table_bytes_per_packet": memory["table_bytes"] / n,
    }
    rows = [ours]
    mismatched = flag_mismatched = None
    if not args.no_tshark and shutil.which("tshark"):
        from tcplab.analysis import _tshark, read_packets
        from tcplab.analysis.expert import FLAG_COLUMNS

        with tempfile.TemporaryDirectory(prefix="tcplab-bench-") as tmp:
            out = Path(tmp) / "tshark.tsv"
            ts = run_tshark(path, out)
            theirs = _tshark.parse(out.read_bytes())
        rows.append({"tool": "tshark -T fields", "packets": len(theirs), "seconds": ts["seconds"],
                     "packets_per_s": len(theirs) / ts["seconds"], "peak_bytes": ts["rss_peak"],
                     "bytes_per_packet": ts["rss_peak"] / max(len(theirs), 1)})
        comparison = _tshark.compare(read_packets(path).packets, theirs)
        mismatched = comparison.mismatched_rows
        flag_cols = set(FLAG_COLUMNS) | {"dup_ack_num", "dup_ack_frame", "acks_frame", "ack_rtt", "bytes_in_flight"}
        details = comparison.details
        flag_mismatched = int(details.loc[details["column"].isin(flag_cols), "frame"].nunique())
        if not comparison.ok:
            print(comparison.summary(), file=sys.stderr)
        ours["speedup"] = ours["packets_per_s"] / rows[1]["packets_per_s"]

    print(table(rows, [("tool", "tool", ""), ("packets", "packets", ",d"), ("seconds", "seconds", ".2f"),
                       ("packets_per_s", "packets/s", ",.0f"), ("bytes_per_packet", "peak B/pkt", ".0f"),
                       ("speedup", "x tshark", ".0f")]))
    print(f"\n  decode {timing['decode']:.3f} s + analysis {timing['analyze']:.3f} s; "
          f"table {ours['table_bytes_per_packet']:.0f} B/pkt, NumPy/Python peak "
          f"{ours['traced_bytes_per_packet']:.0f} B/pkt; {meta['flows']} flows")
    if mismatched is not None:
        print(f"  rows differing from tshark: {mismatched} (in expert columns: {flag_mismatched})")
    checks = {
        "packets_per_s": ours["packets_per_s"] >= GOALS["packets_per_s"],
        "bytes_per_packet": ours["bytes_per_packet"] <= GOALS["bytes_per_packet"],
    }
    if mismatched is not None:
        checks["speedup"] = ours["speedup"] >= GOALS["speedup"]
        checks["mismatched_rows"] = mismatched == 0
    for name, ok in checks.items():
        print(f"  goal {name}: {'met' if ok else 'NOT met'} ({GOALS[name]:,})")

    extra = {"capture": {"path": str(path), "bytes": path.stat().st_size, "snaplen": SNAPLEN, **meta},
             "goals": GOALS, "met": checks, "mismatched_rows": mismatched, "mismatched_expert_rows": flag_mismatched}
    saved = save_to(args.out, rows, **extra)
    print(f"  result: {saved}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
