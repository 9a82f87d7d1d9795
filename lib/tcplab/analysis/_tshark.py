"""tshark as the reference: the same columns from Wireshark itself, and a row-by-row diff.

Used by the tests and the benchmark to show that :func:`~.packets.read_packets` gives
Wireshark's numbers. The preferences that decide the analysis are passed explicitly so a
user's Wireshark profile cannot change the reference.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: tshark field -> how it is compared (see ``compare``).
FIELDS = {
    "frame.number": "frame",
    "tcp.stream": "flow",
    "tcp.seq": "seq",
    "tcp.ack": "ack",
    "tcp.len": "len",
    "tcp.flags": "flags",
    "tcp.window_size_value": "win_raw",
    "tcp.window_size": "win",
    "ip.id": "ip_id",
    "tcp.options.mss_val": "mss",
    "tcp.options.wscale.shift": "wscale",
    "tcp.options.sack_le": "sack_le",
    "tcp.options.sack_re": "sack_re",
    "tcp.options.timestamp.tsval": "ts_val",
    "tcp.options.timestamp.tsecr": "ts_ecr",
    "tcp.analysis.retransmission": "retransmission",
    "tcp.analysis.fast_retransmission": "fast_retransmission",
    "tcp.analysis.spurious_retransmission": "spurious_retransmission",
    "tcp.analysis.out_of_order": "out_of_order",
    "tcp.analysis.lost_segment": "lost_segment",
    "tcp.analysis.ack_lost_segment": "acked_unseen",
    "tcp.analysis.duplicate_ack": "dup_ack",
    "tcp.analysis.duplicate_ack_num": "dup_ack_num",
    "tcp.analysis.duplicate_ack_frame": "dup_ack_frame",
    "tcp.analysis.zero_window": "zero_window",
    "tcp.analysis.zero_window_probe": "zero_window_probe",
    "tcp.analysis.zero_window_probe_ack": "zero_window_probe_ack",
    "tcp.analysis.window_full": "window_full",
    "tcp.analysis.window_update": "window_update",
    "tcp.analysis.keep_alive": "keep_alive",
    "tcp.analysis.keep_alive_ack": "keep_alive_ack",
    "tcp.analysis.reused_ports": "reused_ports",
    "tcp.analysis.acks_frame": "acks_frame",
    "tcp.analysis.ack_rtt": "ack_rtt",
    "tcp.analysis.bytes_in_flight": "bytes_in_flight",
}

#: The defaults of tshark 4.0 that the analysis depends on, pinned.
PREFERENCES = {
    "tcp.analyze_sequence_numbers": "TRUE",
    "tcp.relative_sequence_numbers": "TRUE",
    "tcp.track_bytes_in_flight": "TRUE",
    "tcp.bif_seq_based": "FALSE",
    "tcp.fastrt_supersedes_ooo": "TRUE",
    "tcp.default_window_scaling": "Not known",
    "ip.defragment": "TRUE",
}


def available(tshark: str = "tshark") -> bool:
    return shutil.which(tshark) is not None


def command(path: str, tshark: str = "tshark") -> list[str]:
    argv = [tshark, "-n", "-r", str(path), "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a",
            "-E", "aggregator=,", "-E", "header=n"]
    for key, value in PREFERENCES.items():
        argv += ["-o", f"{key}:{value}"]
    for name in FIELDS:
        argv += ["-e", name]
    return argv


def run(path: str, tshark: str = "tshark", timeout: float = 900) -> pd.DataFrame:
    """tshark's view of every TCP frame: one row per frame that has ``tcp.stream``."""
    out = subprocess.run(command(path, tshark), capture_output=True, timeout=timeout, check=False)
    if out.returncode != 0 and not out.stdout:
        raise RuntimeError(f"tshark failed on {path}: {out.stderr.decode(errors='replace').strip()}")
    return parse(out.stdout)


def parse(text: bytes | str) -> pd.DataFrame:
    if isinstance(text, str):
        text = text.encode()
    df = pd.read_csv(io.BytesIO(text), sep="\t", header=None, names=list(FIELDS.values()), dtype=str,
                     keep_default_na=False, quoting=3)
    return df[df["flow"] != ""].reset_index(drop=True)


def _first_int(s: pd.Series, missing: int) -> np.ndarray:
    first = s.str.split(",", n=1).str[0]
    out = np.full(len(s), missing, np.int64)
    has = (first != "").to_numpy()
    vals = first[has]
    out[has] = [int(v, 16) if v.startswith("0x") else int(v) for v in vals]
    return out


def _plain(x):
    return x.item() if hasattr(x, "item") else x


@dataclass
class Comparison:
    rows: int  # TCP rows compared
    mismatched_rows: int
    details: pd.DataFrame  # frame, column, ours, tshark (one row per differing cell)

    @property
    def ok(self) -> bool:
        return self.mismatched_rows == 0

    def summary(self, limit: int = 20) -> str:
        if self.ok:
            return f"{self.rows} rows, all equal"
        counts = self.details.groupby("column").size().sort_values(ascending=False)
        head = self.details.head(limit).to_string(index=False)
        return f"{self.mismatched_rows} of {self.rows} rows differ; by column: {counts.to_dict()}\n{head}"


def without_frames(ours: pd.DataFrame, dropped: np.ndarray) -> pd.DataFrame:
    """``ours`` as the file without the frames ``dropped`` would give it: those rows gone,
    and frame numbers (``frame``, ``acks_frame``, ``dup_ack_frame``) counted again as tshark
    counts the shorter file (``editcap FILE OUT FRAMES...`` writes it). A reference to a
    dropped frame becomes 0."""
    dropped = np.asarray(dropped, np.int64)
    last = int(max(ours["frame"].max(), dropped.max(initial=0))) if len(ours) else 0
    keep = np.ones(last + 1, bool)
    keep[0] = False
    keep[dropped] = False
    renumber = np.cumsum(keep) * keep
    out = ours.loc[keep[ours["frame"].to_numpy()]].copy()
    for column in ("frame", "acks_frame", "dup_ack_frame"):
        if column in out:
            out[column] = renumber[out[column].to_numpy()]
    return out.reset_index(drop=True)


def compare(ours: pd.DataFrame, theirs: pd.DataFrame) -> Comparison:
    """Cell-by-cell comparison of a packets table (with expert columns) and ``run()``."""
    problems: list[tuple[int, str, object, object]] = []
    frames_ours = ours["frame"].to_numpy()
    frames_theirs = theirs["frame"].astype(np.int64).to_numpy()
    only_ours = np.setdiff1d(frames_ours, frames_theirs)
    only_theirs = np.setdiff1d(frames_theirs, frames_ours)
    for fr in only_ours[:1000]:
        problems.append((int(fr), "frame", "present", "absent"))
    for fr in only_theirs[:1000]:
        problems.append((int(fr), "frame", "absent", "present"))
    common = np.intersect1d(frames_ours, frames_theirs)
    o = ours.set_index("frame").loc[common]
    t = theirs.assign(frame=frames_theirs).set_index("frame").loc[common]

    def check(column: str, mine: np.ndarray, ref: np.ndarray) -> None:
        bad = np.flatnonzero(mine != ref)
        for j in bad[:1000]:
            problems.append((int(common[j]), column, _plain(mine[j]), _plain(ref[j])))
        if len(bad) > 1000:
            problems.extend((int(common[j]), column, None, None) for j in bad[1000:])

    mod = np.int64(1) << 32
    check("flow", o["flow"].to_numpy(np.int64), _first_int(t["flow"], -1))
    check("seq", o["seq"].to_numpy(np.int64) % mod, _first_int(t["seq"], -1))
    check("ack", o["ack"].to_numpy(np.int64) % mod, _first_int(t["ack"], -1))
    check("len", o["len"].to_numpy(np.int64), _first_int(t["len"], -1))
    check("flags", o["flags"].to_numpy(np.int64), _first_int(t["flags"], -1))
    check("win_raw", o["win_raw"].to_numpy(np.int64), _first_int(t["win_raw"], -1))
    win = o["win"].to_numpy(np.int64)
    check("win", np.where(win >= 0, win, o["win_raw"].to_numpy(np.int64)), _first_int(t["win"], -1))
    check("ip_id", o["ip_id"].to_numpy(np.int64), _first_int(t["ip_id"], -1))
    check("mss", o["mss"].to_numpy(np.int64), _first_int(t["mss"], 0))
    check("wscale", o["wscale"].to_numpy(np.int64), _first_int(t["wscale"], -1))
    check("ts_val", o["ts_val"].to_numpy(np.int64), _first_int(t["ts_val"], -1))
    check("ts_ecr", o["ts_ecr"].to_numpy(np.int64), _first_int(t["ts_ecr"], -1))
    count = o["sack_count"].to_numpy(np.int64)
    cut = o["snaplen_truncated"].to_numpy()
    for edge in ("le", "re"):
        mine = []
        for row, c, partial in zip(o[[f"sack_{edge}{j}" for j in range(1, 5)]].to_numpy(np.int64), count, cut):
            # A block cut by the snaplen shows its left edge only, in both tools.
            n = min(c + (1 if partial and c < 4 and row[min(c, 3)] != -1 else 0), 4)
            mine.append(",".join(str(int(v) % int(mod)) for v in row[:n]))
        ref = [",".join(s.split(",")[:4]) if s else "" for s in t[f"sack_{edge}"]]
        check(f"sack_{edge}", np.array(mine, dtype=object), np.array(ref, dtype=object))
    if "retransmission" in o.columns:
        for tshark_name, col in FIELDS.items():
            if tshark_name.startswith("tcp.analysis.") and o[col].dtype == bool:
                check(col, o[col].to_numpy(), (t[col] != "").to_numpy())
        check("dup_ack_num", o["dup_ack_num"].to_numpy(np.int64), _first_int(t["dup_ack_num"], 0))
        check("dup_ack_frame", o["dup_ack_frame"].to_numpy(np.int64), _first_int(t["dup_ack_frame"], 0))
        check("acks_frame", o["acks_frame"].to_numpy(np.int64), _first_int(t["acks_frame"], 0))
        check("bytes_in_flight", o["bytes_in_flight"].to_numpy(np.int64), _first_int(t["bytes_in_flight"], -1))
        rtt = o["ack_rtt"].to_numpy()
        mine_ns = np.where(np.isnan(rtt), -1, np.round(np.nan_to_num(rtt) * 1e9)).astype(np.int64)
        ref = t["ack_rtt"].to_numpy()
        ref_ns = np.array([round(float(v) * 1e9) if v else -1 for v in ref], np.int64)
        check("ack_rtt", mine_ns, ref_ns)
    details = pd.DataFrame(problems, columns=["frame", "column", "ours", "tshark"]).sort_values(
        ["frame", "column"], kind="stable").reset_index(drop=True)
    return Comparison(rows=len(common), mismatched_rows=int(details["frame"].nunique()), details=details)
