"""``tcplab diagnose FILE``: what limited the TCP transfer in a capture (any pcap/pcapng);
``tcplab diagnose FILE --all [-o table.csv]``: every flow of it, one line each (and one table);
``tcplab diagnose FOLDER [--all] [-o table.csv]``: every capture in a folder, in parallel
(:mod:`tcplab.analysis.batch`), one line per capture (per flow with ``--all``).
``--language zh`` (default ``$TCPLAB_LANG``, else English): the lines, the table headers, the
diagnosis's title and sentences and the HTML page in that language (``strings/<language>.json``);
labels, endpoints, units and the JSON's keys stay as they are.

This module reads the options and hands them to :func:`tcplab.analysis.batch.answer`, which
diagnoses and prints; it writes a flow's HTML page (:mod:`tcplab.report.diagnosis_page`). Exit codes: 0 diagnosed; 1 read fine but no
clear limit ("undetermined"; with ``--all``: for every flow); 2 bad input (unreadable file,
not a capture, no TCP packet, no such flow, bad option); 3 an internal error, in one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from ..analysis._jit import interpret_if_small
from ..units import ParameterError, parse_duration
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
    from ..analysis.batch import Request, answer
    from ..analysis.packets import PcapError

    try:
        request = Request(file=args.file, flow=args.flow, list_flows=args.list, every_flow=args.all,
                          as_json=args.json, output=args.output, t_range=parse_t_range(args.t_range),
                          language=args.language)
        done = answer(request, words)
    except (PcapError, ParameterError) as exc:
        print(f"tcplab diagnose: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if done.clear is None:
        return EXIT_BAD_INPUT  # a folder where no capture could be diagnosed
    if done.diagnosis is not None and args.output:
        # Imported here: the report layer (nbformat, Jinja) costs seconds at start-up.
        from ..report.diagnosis_page import write_page

        try:
            write_page(done.diagnosis, done.table, args.output, source=args.file, language=args.language)
        except OSError as exc:
            print(f"tcplab diagnose: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if not args.json:
            print(words("diagnosis.line.report_written", path=args.output))
    return EXIT_OK if done.clear else EXIT_UNDETERMINED
