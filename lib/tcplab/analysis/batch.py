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

__all__ = ["COLUMNS", "CAPTURE_SUFFIXES", "captures_in", "diagnose_file", "diagnose_files", "table_row",
           "table_frame", "TableWriter"]

#: The table's columns, in order.
COLUMNS = ("capture", "flow", "sender", "receiver", "bytes", "duration_s", "goodput_bps", "label", "share",
           "summary", "error")
#: What a file of captures is called: pcap, pcapng and their usual spellings.
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")


def captures_in(folder: str | os.PathLike) -> list[Path]:
    """The capture files under ``folder`` (any depth), by name."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix.lower() in CAPTURE_SUFFIXES)


def diagnose_file(path: str | os.PathLike, every_flow: bool = False, language: str = "en") -> list[dict]:
    """The rows of one capture: its largest flow, or every flow that carried data (the
    summaries, and why a file has none, in ``language``: a worker process does not share the
    caller's :func:`~tcplab.words.speaking`)."""
    from ..words import speaking

    with speaking(language):
        return _diagnose_file(path, every_flow, language)


def _diagnose_file(path: str | os.PathLike, every_flow: bool, language: str) -> list[dict]:
    from ..words import messages
    from .diagnose import diagnose_flows
    from .packets import read_packets
    from .table import data_flows

    try:
        table = read_packets(path)
        flows = data_flows(table)
        if not flows:
            return [table_row(path, error=messages()("flow_error.no_data"))]
        return [table_row(path, diagnosis=d) for d in diagnose_flows(table, flows if every_flow else flows[:1],
                                                                     language=language)]
    except Exception as exc:  # noqa: BLE001 - one bad file is a row of the table, not the end of it
        return [table_row(path, error=f"{type(exc).__name__}: {exc}")]


def table_row(path, *, diagnosis=None, error: str | None = None) -> dict:
    """One row of the table (:data:`COLUMNS`): a flow's diagnosis, or why the file has none."""
    row = dict.fromkeys(COLUMNS)
    row.update(capture=str(path), error=error)
    if diagnosis is not None:
        m = diagnosis.metrics
        sender, receiver = m.data_endpoints
        row.update(flow=m.flow, sender=sender, receiver=receiver, bytes=m.payload_bytes, duration_s=m.transfer_s,
                   goodput_bps=m.goodput_bps, label=diagnosis.label,
                   share=dict(diagnosis.limits).get(diagnosis.label), summary=diagnosis.summary)
    return row


def diagnose_files(paths: Iterable[str | os.PathLike], *, every_flow: bool = False, workers: int | None = None,
                   language: str = "en") -> pd.DataFrame:
    """Every capture of ``paths`` diagnosed, ``workers`` processes at a time (default: one per
    core), as one table in the order of ``paths``."""
    paths = [Path(p) for p in paths]
    workers = max(1, min(workers or os.cpu_count() or 1, len(paths) or 1))
    if workers == 1:
        rows = [row for p in paths for row in diagnose_file(p, every_flow, language)]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = [row for rows_of_file in pool.map(diagnose_file, paths, [every_flow] * len(paths),
                                                              [language] * len(paths))
                    for row in rows_of_file]
    return table_frame(rows)


def table_frame(rows: list[dict]) -> pd.DataFrame:
    """The table of :func:`table_row` rows, its columns in order."""
    return pd.DataFrame(rows, columns=list(COLUMNS))


class TableWriter:
    """Rows of the table written to ``path`` (.csv or .parquet) as they come, ``chunk`` at a
    time: the verdicts on a busy server's capture (tens of thousands of flows, a summary
    sentence each) are never held all at once. Opening the file happens here, so a path that
    cannot be written fails before any work. Use as a context manager."""

    #: Column types of the parquet file (a chunk whose ``error`` is all None keeps them).
    ARROW_TYPES = {"capture": "string", "flow": "int64", "sender": "string", "receiver": "string", "bytes": "int64",
                   "duration_s": "float64", "goodput_bps": "float64", "label": "string", "share": "float64",
                   "summary": "string", "error": "string"}

    def __init__(self, path: str | os.PathLike, chunk: int = 4096) -> None:
        self.path, self.chunk, self.rows = str(path), chunk, []
        self.csv = self.path.lower().endswith(".csv")
        if self.csv:
            self.file = open(self.path, "w", newline="", encoding="utf-8")
            self.header = True
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            self.schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in self.ARROW_TYPES.items()])
            self.file = pq.ParquetWriter(self.path, self.schema)

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        frame = table_frame(self.rows)
        self.rows = []
        if self.csv:
            frame.to_csv(self.file, header=self.header, index=False)
            self.header = False
        else:
            import pyarrow as pa

            self.file.write_table(pa.Table.from_pandas(frame, schema=self.schema, preserve_index=False))

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.file.close()

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
