"""Many captures at once, and what ``tcplab diagnose`` does with a request: a folder of pcaps
diagnosed in parallel, into one table; every flow of one capture (``--all``); one flow.

::

    frame = diagnose_files(captures_in("captures/"), every_flow=True)
    frame.to_csv("verdicts.csv")

One row per diagnosed flow (:data:`COLUMNS`): the capture, the flow and its endpoints, bytes,
duration, goodput, the label with its share and the one-line summary. A file that is not a
capture, or holds no TCP payload, gets one row with its ``error`` and the others go on. Files
are spread over the machine's cores, one process each (the pcap engine and the diagnosis are
CPU-bound Python and numba: threads would share one core).

:func:`answer` carries out a :class:`Request` (the command's options, checked): it reads the
capture, diagnoses what was asked, prints the lines (:class:`~.lines.Lines`) or the JSON, writes
the table, and returns an :class:`Answer` the command turns into its exit code (a flow's page
is the report layer's, written by the command).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, TextIO

import pandas as pd

from ..units import ParameterError
from ..words import Messages
from .lines import Lines, counts_of

__all__ = ["COLUMNS", "CAPTURE_SUFFIXES", "TABLE_SUFFIXES", "captures_in", "diagnose_file", "diagnose_files",
           "table_row", "table_frame", "TableWriter", "Request", "Answer", "answer", "diagnose_all"]

#: The table's columns, in order.
COLUMNS = ("capture", "flow", "sender", "receiver", "bytes", "duration_s", "goodput_bps", "label", "share",
           "summary", "error")
#: What a file of captures is called: pcap, pcapng and their usual spellings.
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")
#: What a table of verdicts (``--all``, a folder) may be written as, by the suffix of ``-o``.
TABLE_SUFFIXES = (".csv", ".parquet")


def is_table(output: str) -> bool:
    return os.path.splitext(output)[1].lower() in TABLE_SUFFIXES


def _unwritable(output: str, exc: OSError) -> ParameterError:
    return ParameterError("--output", output, "a file that can be written", exc.strerror or str(exc))


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


# --------------------------------------------------------------------------- one request


@dataclass(frozen=True)
class Request:
    """What ``tcplab diagnose`` was asked: ``file`` (a capture, or a folder of them), ``flow``,
    ``list_flows``, ``every_flow`` (``--all``), ``as_json``, ``output`` (a page or a table),
    ``t_range`` (seconds) and ``language``."""

    file: str
    flow: int | None = None
    list_flows: bool = False
    every_flow: bool = False
    as_json: bool = False
    output: str | None = None
    t_range: tuple[float, float] | None = None
    language: str = "en"


@dataclass
class Answer:
    """What came of a request: ``clear`` (some flow got a label other than "undetermined";
    None: nothing was diagnosed, as in a folder where no capture could be), and for one flow
    its ``diagnosis`` and the ``table`` it came from (a page is drawn from both)."""

    clear: bool | None
    diagnosis: Any = None
    table: Any = None


def answer(request: Request, words: Messages, out: TextIO | None = None, err: TextIO | None = None) -> Answer:
    """Carry out ``request``, its lines (or JSON) to ``out`` and the reader's warnings to ``err``.
    Bad input (an unreadable capture, an option that does not fit) is a
    :class:`~tcplab.units.ParameterError` or :class:`~.packets.PcapError`, raised before anything
    is written."""
    out, err = out or sys.stdout, err or sys.stderr
    if os.path.isdir(request.file):
        return _folder(request, words, out)
    from .diagnose import diagnose
    from .packets import read_packets

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_packets(request.file)
    for w in caught:
        err.write(f"tcplab diagnose: {words('diagnosis.line.warning', warning=w.message)}\n")
    if request.list_flows:
        from .metrics import flow_rows

        rows = flow_rows(table)
        out.write(json.dumps(rows, indent=2) + "\n") if request.as_json else Lines(words, out).flows(rows)
        return Answer(clear=True)
    if request.every_flow:
        if request.flow is not None or (request.output and not is_table(request.output)):
            raise ParameterError("--all", "with " + ("--flow" if request.flow is not None else "--output"),
                                 "--all alone, or with --t-range, --json and -o a table (" +
                                 " or ".join(TABLE_SUFFIXES) + ")",
                                 "--all diagnoses every flow; --flow and a page are about one")
        return _every_flow(request, diagnose_all(_between(table, request.t_range), request.language), words, out)
    if request.flow is not None and not 0 <= request.flow < len(table.flows):
        raise ParameterError("--flow", request.flow, f"a flow number from 0 to {len(table.flows) - 1} (see --list)")
    table = _between(table, request.t_range)
    if request.flow is not None and not (table.packets["flow"] == request.flow).any():
        raise ParameterError("--flow", request.flow, "a flow with packets in --t-range")
    result = diagnose(table, request.flow, language=request.language)
    if request.as_json:
        out.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        Lines(words, out).diagnosis(result)
    return Answer(clear=result.label != "undetermined", diagnosis=result, table=table)


def _between(table, t_range):
    """``table`` cut to ``--t-range``; a range holding no packet is bad input."""
    if t_range is None:
        return table
    cut = table.between(*t_range)
    if cut.packets.empty:
        raise ParameterError("--t-range", f"{t_range[0]}:{t_range[1]}", "a range holding packets",
                             "no packet in that range")
    return cut


def diagnose_all(table, language: str = "en") -> Iterator:
    """The diagnosis of every flow of ``table`` that carries payload, largest first, one at a
    time (:func:`~.diagnose.diagnose_flows`: all flows' metrics in one compiled pass, then each
    verdict as it is printed, so a busy server's capture is never held as tens of thousands of
    results)."""
    from tqdm import tqdm

    from .diagnose import diagnose_flows
    from .table import data_flows

    flows = data_flows(table)
    if not flows:
        raise ParameterError("file", str(table.source.path), "a capture holding TCP payload (in --t-range)",
                             "no flow carried data")
    # Shown only to a person watching: a capture from a busy server can hold thousands of flows.
    return iter(tqdm(diagnose_flows(table, flows, language=language), total=len(flows), desc="diagnosing", unit="flow",
                     file=sys.stderr, disable=len(flows) < 20 or not sys.stderr.isatty()))


def _every_flow(request: Request, results: Iterator, words: Messages, out: TextIO) -> Answer:
    """Each flow's line (or JSON object) as soon as it is diagnosed, then the count per label;
    with ``-o``, each flow's row of the table as well (:data:`COLUMNS`), written as it comes."""
    try:
        writer = TableWriter(request.output) if request.output else nullcontext()
    except OSError as exc:
        raise _unwritable(request.output, exc) from exc
    counts: Counter = Counter()
    lines = Lines(words, out)
    with writer:
        if request.as_json:
            out.write("[")
        else:
            lines.every_flow_head()
        for n, r in enumerate(results):
            counts[r.label] += 1
            if request.output:
                writer.add(table_row(request.file, diagnosis=r))
            if request.as_json:
                # The layout json.dumps(list, indent=2) gives, one element at a time.
                out.write(("," if n else "") + "\n  " + json.dumps(r.to_dict(), indent=2).replace("\n", "\n  "))
            else:
                lines.every_flow(r)
    if request.as_json:
        out.write("\n]\n")
    else:
        lines.say("diagnosis.line.flows", n=sum(counts.values()), counts=counts_of(counts))
        if request.output:
            lines.say("diagnosis.line.table_written", path=request.output)
    return Answer(clear=any(label != "undetermined" for label in counts))


def _folder(request: Request, words: Messages, out: TextIO) -> Answer:
    """Every capture under the folder: its largest flow (every data flow with ``--all``)."""
    for option, given in (("--flow", request.flow is not None), ("--list", request.list_flows),
                          ("--t-range", request.t_range is not None)):
        if given:
            raise ParameterError(option, "with a folder", "a capture file", f"{option} is about one capture")
    if request.output and not is_table(request.output):
        raise ParameterError("--output", request.output, "a table file: " + " or ".join(TABLE_SUFFIXES),
                             "a folder gives a table, not a page")
    paths = captures_in(request.file)
    if not paths:
        raise ParameterError("file", request.file, "a capture, or a folder holding " + ", ".join(CAPTURE_SUFFIXES),
                             "no capture in the folder")
    frame = diagnose_files(paths, every_flow=request.every_flow, language=request.language)
    frame["capture"] = [os.path.relpath(c, request.file) for c in frame["capture"]]
    if request.output:
        try:
            (frame.to_csv if request.output.lower().endswith(".csv") else frame.to_parquet)(request.output, index=False)
        except OSError as exc:
            raise _unwritable(request.output, exc) from exc
    failed, done = frame[frame["error"].notna()], frame[frame["error"].isna()]
    if request.as_json:
        out.write(frame.to_json(orient="records", indent=2) + "\n")
    else:
        lines = Lines(words, out)
        lines.folder(done, failed, len(paths))
        if request.output:
            lines.say("diagnosis.line.table_written", path=request.output)
    return Answer(clear=None if done.empty else bool((done["label"] != "undetermined").any()))
