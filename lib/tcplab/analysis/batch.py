"""Many captures at once: a folder of pcaps diagnosed in parallel, into one table.

::

    frame = diagnose_files(captures_in("captures/"), every_flow=True)
    frame.to_csv("verdicts.csv")

One row per diagnosed flow (:data:`COLUMNS`): the capture, the flow and its endpoints, bytes,
duration, goodput, the label with its share and the one-line summary. A file that is not a
capture, or holds no TCP payload, gets one row with its ``error`` and the others go on. Files
are spread over the machine's cores, one process each (the pcap engine and the diagnosis are
CPU-bound Python and numba: threads would share one core).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterable

import pandas as pd

__all__ = ["COLUMNS", "CAPTURE_SUFFIXES", "captures_in", "diagnose_file", "diagnose_files"]

#: The table's columns, in order.
COLUMNS = ("capture", "flow", "sender", "receiver", "bytes", "duration_s", "goodput_bps", "label", "share",
           "summary", "error")
#: What a file of captures is called: pcap, pcapng and their usual spellings.
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")


def captures_in(folder: str | os.PathLike) -> list[Path]:
    """The capture files under ``folder`` (any depth), by name."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix.lower() in CAPTURE_SUFFIXES)


def diagnose_file(path: str | os.PathLike, every_flow: bool = False) -> list[dict]:
    """The rows of one capture: its largest flow, or every flow that carried data."""
    from .diagnose import diagnose
    from .packets import read_packets
    from .table import data_flows

    try:
        table = read_packets(path)
        flows = data_flows(table)
        if not flows:
            return [_row(path, error="no TCP payload")]
        return [_row(path, diagnosis=diagnose(table, flow)) for flow in (flows if every_flow else flows[:1])]
    except Exception as exc:  # noqa: BLE001 - one bad file is a row of the table, not the end of it
        return [_row(path, error=f"{type(exc).__name__}: {exc}")]


def _row(path, *, diagnosis=None, error: str | None = None) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(capture=str(path), error=error)
    if diagnosis is not None:
        m = diagnosis.metrics
        sender, receiver = m.data_endpoints
        row.update(flow=m.flow, sender=sender, receiver=receiver, bytes=m.payload_bytes, duration_s=m.transfer_s,
                   goodput_bps=m.goodput_bps, label=diagnosis.label,
                   share=dict(diagnosis.limits).get(diagnosis.label), summary=diagnosis.summary)
    return row


def diagnose_files(paths: Iterable[str | os.PathLike], *, every_flow: bool = False,
                   workers: int | None = None) -> pd.DataFrame:
    """Every capture of ``paths`` diagnosed, ``workers`` processes at a time (default: one per
    core), as one table in the order of ``paths``."""
    paths = [Path(p) for p in paths]
    workers = max(1, min(workers or os.cpu_count() or 1, len(paths) or 1))
    if workers == 1:
        rows = [row for p in paths for row in diagnose_file(p, every_flow)]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = [row for rows_of_file in pool.map(diagnose_file, paths, [every_flow] * len(paths))
                    for row in rows_of_file]
    return pd.DataFrame(rows, columns=list(COLUMNS))
