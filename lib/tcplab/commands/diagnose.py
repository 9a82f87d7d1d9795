"""``tcplab diagnose FILE``: what limited the TCP transfer in a capture (any pcap/pcapng);
``tcplab diagnose FILE --all [-o table.csv]``: every flow of it, one line each (and one table);
``tcplab diagnose FOLDER [--all] [-o table.csv]``: every capture in a folder, in parallel
(:mod:`tcplab.analysis.batch`), one line per capture (per flow with ``--all``).
``--language zh`` (default ``$TCPLAB_LANG``, else English): the lines, the table headers, the
diagnosis's title and sentences and the HTML page in that language (``strings/<language>.json``);
labels, endpoints, units and the JSON's keys stay as they are.

The diagnosis comes from :mod:`tcplab.analysis`; this module reads the options, prints, and
writes the HTML page (:mod:`tcplab.report.diagnosis_page`). Exit codes: 0 diagnosed; 1 read fine but no
clear limit ("undetermined"; with ``--all``: for every flow); 2 bad input (unreadable file,
not a capture, no TCP packet, no such flow, bad option); 3 an internal error, in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import unicodedata
import warnings
from collections import Counter
from typing import Iterator, Sequence

from ..analysis._jit import interpret_if_small
from ..units import ParameterError, format_duration, format_rate, format_size, parse_duration
from ..words import Messages, speaking
from .common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_UNDETERMINED, language_option

__all__ = ["main", "build_parser", "parse_t_range"]


class _Parser(argparse.ArgumentParser):
    """The labels join the epilog only when help is shown: they live in
    :mod:`tcplab.analysis.diagnose`, whose import (pandas, the kernels) must wait until the
    capture's size has chosen how the kernels run (:func:`~tcplab.analysis._jit.interpret_if_small`)."""

    def format_help(self) -> str:
        from ..analysis.diagnose import LABELS

        epilog, self.epilog = self.epilog, "labels: " + ", ".join(LABELS) + ". " + (self.epilog or "")
        try:
            return super().format_help()
        finally:
            self.epilog = epilog


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tcplab diagnose", description="Diagnose what limited a TCP transfer in a pcap or pcapng file.",
        epilog="exit codes: 0 diagnosed; 1 no clear limit (undetermined; with --all: for every flow); "
               "2 bad input (unreadable or not a capture, no TCP, no such flow, bad option); "
               "3 internal error (a fault in tcplab: please report it with the capture; "
               "TCPLAB_TRACEBACK=1 shows where)")
    parser.add_argument("file", help="capture file (pcap or pcapng, any link type), or a folder of them")
    parser.add_argument("--flow", type=int, default=None, metavar="N",
                        help="flow number (tcp.stream, as --list shows); default: the largest")
    parser.add_argument("--list", action="store_true", help="list the flows and stop")
    parser.add_argument("--all", action="store_true",
                        help="diagnose every flow that carried data, one line each, largest first "
                             "(a server's capture: which connections hit which limit)")
    parser.add_argument("--json", action="store_true", help="print the diagnosis (or the flow list) as JSON")
    parser.add_argument("-o", "--output", metavar="REPORT.html",
                        help="write a self-contained HTML report; with --all or for a folder, the table "
                             "(.csv or .parquet)")
    parser.add_argument("--t-range", metavar="A:B", help="only packets from A to B seconds into the capture")
    parser.add_argument("--language", default=None, metavar="LANG",
                        help="language of the lines, the diagnosis's sentences and the page: en, zh, … (a strings "
                             "file in tcplab/strings/; default: $TCPLAB_LANG, else en)")
    return parser


def _pad(text: object, width: int, align: str = "<") -> str:
    """``text`` padded to ``width`` terminal columns: a Chinese character takes two."""
    text = str(text)
    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    return format(text, f"{align}{max(0, width - wide)}")


def parse_t_range(text: str | None) -> tuple[float, float] | None:
    """``"1.5:3"`` -> (1.5, 3.0) seconds; a bare number is seconds here, as in the capture's time."""
    if text is None:
        return None
    accepted = "A:B in seconds from the capture's start, A < B (e.g. 0.5:2, 1s:2500ms)"
    low, sep, high = text.partition(":")
    if not sep:
        raise ParameterError("--t-range", text, accepted)
    bounds = []
    for part, default in ((low, 0.0), (high, float("inf"))):
        part = part.strip()
        if not part:
            bounds.append(default)
            continue
        try:
            bounds.append(float(part))
        except ValueError:
            bounds.append(parse_duration("--t-range", part))
    if not bounds[0] < bounds[1] or bounds[0] < 0:
        raise ParameterError("--t-range", text, accepted, "empty or negative range")
    return bounds[0], bounds[1]


def _between(table, t_range):
    """``table`` cut to ``--t-range``; a range holding no packet is bad input."""
    if t_range is None:
        return table
    cut = table.between(*t_range)
    if cut.packets.empty:
        raise ParameterError("--t-range", f"{t_range[0]}:{t_range[1]}", "a range holding packets",
                             "no packet in that range")
    return cut


def main(argv: Sequence[str]) -> int:
    try:
        return _diagnose(argv)
    except Exception as exc:  # a fault of ours: a one-line message and its own exit code
        if os.environ.get("TCPLAB_TRACEBACK"):
            raise
        print(f"tcplab diagnose: internal error: {type(exc).__name__}: {exc} (please report it with the "
              "capture; TCPLAB_TRACEBACK=1 shows where)", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        _before_exit()


def _before_exit() -> None:
    """When this process is the ``tcplab`` command and ends right after: leave its objects to
    the OS. The interpreter's shutdown would otherwise walk every object pandas, numba and
    the packet table made (~0.3 s, a third of the run on a small capture). Not when the
    command runs inside another program, whose garbage must still be collected."""
    import gc

    program = sys.argv[0] if sys.argv else ""
    if os.path.basename(program) == "tcplab" or program.endswith(os.path.join("tcplab", "commands", "__main__.py")):
        gc.freeze()


def _diagnose(argv: Sequence[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # argparse: --help is 0, a bad option 2
        return int(exc.code or 0)
    try:
        args.language = language_option(args.language)
    except ParameterError as exc:  # before the capture is read: nothing was touched
        print(f"tcplab diagnose: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    words = Messages(args.language)
    with speaking(args.language):  # its errors too, not only its pages, in the language asked for
        return _diagnose_read(args, words)


def _diagnose_read(args: argparse.Namespace, words: Messages) -> int:
    if not os.path.isdir(args.file):
        interpret_if_small([args.file])  # before the analysis loads its kernels
    from ..analysis.diagnose import diagnose
    from ..analysis.packets import PcapError, read_packets

    if os.path.isdir(args.file):
        try:
            return _diagnose_folder(args, words)
        except ParameterError as exc:
            print(f"tcplab diagnose: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        t_range = parse_t_range(args.t_range)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = read_packets(args.file)
        for w in caught:
            print(f"tcplab diagnose: {words('diagnosis.line.warning', warning=w.message)}", file=sys.stderr)
        if args.list:
            return _print_flows(table, args.json, words)
        if args.all:
            if args.flow is not None or (args.output and not _is_table(args.output)):
                raise ParameterError("--all", "with " + ("--flow" if args.flow is not None else "--output"),
                                     "--all alone, or with --t-range, --json and -o a table (" +
                                     " or ".join(TABLE_SUFFIXES) + ")",
                                     "--all diagnoses every flow; --flow and a page are about one")
            return _print_all(args, diagnose_all(_between(table, t_range), args.language), words)
        if args.flow is not None and not 0 <= args.flow < len(table.flows):
            raise ParameterError("--flow", args.flow, f"a flow number from 0 to {len(table.flows) - 1} (see --list)")
        table = _between(table, t_range)
        if args.flow is not None and not (table.packets["flow"] == args.flow).any():
            raise ParameterError("--flow", args.flow, "a flow with packets in --t-range")
        result = diagnose(table, args.flow, language=args.language)
    except (PcapError, ParameterError) as exc:
        print(f"tcplab diagnose: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print_diagnosis(result, words)
    if args.output:
        # Imported here: the report layer (nbformat, Jinja) costs seconds at start-up.
        from ..report.diagnosis_page import write_page

        try:
            write_page(result, table, args.output, source=args.file, language=args.language)
        except OSError as exc:
            print(f"tcplab diagnose: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if not args.json:
            print(words("diagnosis.line.report_written", path=args.output))
    return EXIT_UNDETERMINED if result.label == "undetermined" else EXIT_OK


#: What a table of verdicts (``--all``, a folder) may be written as, by the suffix of ``-o``.
TABLE_SUFFIXES = (".csv", ".parquet")


def _is_table(output: str) -> bool:
    return os.path.splitext(output)[1].lower() in TABLE_SUFFIXES


def _write_table(frame, output: str) -> bool:
    """``frame`` to ``output`` (.csv or .parquet); False, said on stderr, when it cannot be written."""
    try:
        (frame.to_csv if output.lower().endswith(".csv") else frame.to_parquet)(output, index=False)
    except OSError as exc:
        print(f"tcplab diagnose: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def _diagnose_folder(args: argparse.Namespace, words: Messages) -> int:
    """Every capture under the folder: its largest flow (every data flow with ``--all``)."""
    from ..analysis.batch import CAPTURE_SUFFIXES, captures_in, diagnose_files

    for option, given in (("--flow", args.flow is not None), ("--list", args.list), ("--t-range", args.t_range)):
        if given:
            raise ParameterError(option, "with a folder", "a capture file", f"{option} is about one capture")
    if args.output and not _is_table(args.output):
        raise ParameterError("--output", args.output, "a table file: " + " or ".join(TABLE_SUFFIXES),
                             "a folder gives a table, not a page")
    paths = captures_in(args.file)
    if not paths:
        raise ParameterError("file", args.file, "a capture, or a folder holding " + ", ".join(CAPTURE_SUFFIXES),
                             "no capture in the folder")
    frame = diagnose_files(paths, every_flow=args.all, language=args.language)
    frame["capture"] = [os.path.relpath(c, args.file) for c in frame["capture"]]
    if args.output and not _write_table(frame, args.output):
        return EXIT_BAD_INPUT
    failed = frame[frame["error"].notna()]
    done = frame[frame["error"].isna()]
    if args.json:
        print(frame.to_json(orient="records", indent=2))
    else:
        h = _heads(words)
        width = max(len(h["capture"]), *(len(c) for c in frame["capture"]))
        print(f"{_pad(h['capture'], width)}  {_pad(h['flow'], 4, '>')}  {_pad(h['sender'], 24)} "
              f"{_pad(h['data'], 10, '>')} {_pad(h['duration'], 10, '>')} {_pad(h['goodput'], 13, '>')}  "
              f"{h['diagnosis']}")
        for r in done.itertuples():
            print(f"{r.capture:<{width}}  {int(r.flow):>4}  {r.sender:<24} {format_size(r.bytes):>10} "
                  f"{format_duration(r.duration_s):>10} {_goodput(r.goodput_bps):>13}  {r.label}")
        for r in failed.itertuples():
            print(f"{r.capture:<{width}}  " + words("diagnosis.line.not_diagnosed", error=r.error))
        counts = Counter(done["label"])
        print(words("diagnosis.line.captures", captures=len(paths), flows=len(done),
                    counts=", ".join(f"{n} {label}" for label, n in counts.most_common()))
              + (words("diagnosis.line.not_diagnosed_count", n=len(failed)) if len(failed) else ""))
        if args.output:
            print(words("diagnosis.line.table_written", path=args.output))
    if done.empty:
        return EXIT_BAD_INPUT
    return EXIT_OK if (done["label"] != "undetermined").any() else EXIT_UNDETERMINED


def diagnose_all(table, language: str = "en") -> Iterator:
    """The diagnosis of every flow of ``table`` that carries payload, largest first, one at a
    time (:func:`~tcplab.analysis.diagnose.diagnose_flows`: all flows' metrics in one compiled
    pass, then each verdict as it is printed, so a busy server's capture is never held as
    tens of thousands of results)."""
    from tqdm import tqdm

    from ..analysis.diagnose import diagnose_flows
    from ..analysis.table import data_flows

    flows = data_flows(table)
    if not flows:
        raise ParameterError("file", str(table.source.path), "a capture holding TCP payload (in --t-range)",
                             "no flow carried data")
    # Shown only to a person watching: a capture from a busy server can hold thousands of flows.
    return iter(tqdm(diagnose_flows(table, flows, language=language), total=len(flows), desc="diagnosing", unit="flow",
                     file=sys.stderr, disable=len(flows) < 20 or not sys.stderr.isatty()))


def _print_all(args: argparse.Namespace, results: Iterator, words: Messages) -> int:
    """Each flow's line (or JSON object) as soon as it is diagnosed, then the count per label;
    with ``-o``, each flow's row of the table as well (the columns of a folder's table,
    :data:`tcplab.analysis.batch.COLUMNS`), written as it comes."""
    from contextlib import nullcontext

    from ..analysis.batch import TableWriter, table_row

    try:
        writer = TableWriter(args.output) if args.output else nullcontext()
    except OSError as exc:
        print(f"tcplab diagnose: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    counts: Counter = Counter()
    out = sys.stdout
    with writer:
        if args.json:
            out.write("[")
        else:
            h = _heads(words)
            out.write(f"{_pad(h['flow'], 4, '>')}  {_pad(h['sender'], 24)} {_pad(h['receiver'], 24)} "
                      f"{_pad(h['data'], 10, '>')} {_pad(h['duration'], 10, '>')} {_pad(h['goodput'], 13, '>')}  "
                      f"{h['diagnosis']}\n")
        for n, r in enumerate(results):
            counts[r.label] += 1
            if args.output:
                writer.add(table_row(args.file, diagnosis=r))
            if args.json:
                # The layout json.dumps(list, indent=2) gives, one element at a time.
                out.write(("," if n else "") + "\n  " + json.dumps(r.to_dict(), indent=2).replace("\n", "\n  "))
                continue
            m = r.metrics
            sender, receiver = m.data_endpoints
            out.write(f"{m.flow:>4}  {sender:<24} {receiver:<24} {format_size(m.payload_bytes):>10} "
                      f"{format_duration(m.transfer_s):>10} {_goodput(m.goodput_bps):>13}  {r.label}\n")
    if args.json:
        out.write("\n]\n")
    else:
        print(words("diagnosis.line.flows", n=sum(counts.values()),
                    counts=", ".join(f"{n} {label}" for label, n in counts.most_common())))
        if args.output:
            print(words("diagnosis.line.table_written", path=args.output))
    clear = any(label != "undetermined" for label in counts)
    return EXIT_OK if clear else EXIT_UNDETERMINED


def _print_flows(table, as_json: bool, words: Messages) -> int:
    from ..analysis.metrics import flow_rows

    rows = flow_rows(table)
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    h = _heads(words)
    print(f"{_pad(h['flow'], 4, '>')}  {_pad(h['client'], 24)} {_pad(h['server'], 24)} {_pad(h['packets'], 8, '>')} "
          f"{'c->s':>10} {'s->c':>10} {_pad(h['duration'], 10, '>')}")
    for r in rows:
        print(f"{r['flow']:>4}  {r['client']:<24} {r['server']:<24} {r['packets']:>8} "
              f"{format_size(r['bytes_c2s']):>10} {format_size(r['bytes_s2c']):>10} "
              f"{format_duration(r['duration_s']):>10}")
    return EXIT_OK


def _goodput(bps: float) -> str:
    """A flow's goodput as the lines print it; "-" where it has none (NaN)."""
    return format_rate(bps) if bps == bps else "-"


#: The columns the tables of lines are headed by (``diagnosis.head.<name>``).
_HEADS = ("flow", "capture", "sender", "receiver", "client", "server", "packets", "data", "duration", "goodput",
          "diagnosis")


def _heads(words: Messages) -> dict[str, str]:
    return {name: words(f"diagnosis.head.{name}") for name in _HEADS}


def _print_diagnosis(result, words: Messages) -> None:
    m = result.metrics
    print(words("diagnosis.line.flow", flow=m.flow, client=m.client, arrow="->" if m.data_dir == 0 else "<-",
                server=m.server, size=format_size(m.payload_bytes), duration=format_duration(m.transfer_s),
                goodput=_goodput(m.goodput_bps)))
    print(words("diagnosis.line.diagnosis", title=result.title))
    for sentence in result.sentences:
        print(f"  - {sentence}")
    print(words("diagnosis.line.limits", limits=", ".join(f"{label} {share:.0%}" for label, share in result.limits)))
