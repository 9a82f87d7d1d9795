"""``tcplab i18n``: translations of the course against their English source (:mod:`tcplab.i18n`).

* ``check [--language L] [--strict] [--json]``: per case (its notebook's cells and its room's
  words) and for the shared strings, what is missing, stale (the English changed since it was
  translated) or orphaned (its English is gone); exits 0 when nothing is stale or orphaned (with
  ``--strict``, nothing missing either), else 1.
* ``stub --language L CASE…``: adds an entry ``{"text": null, "english": …}`` for each Markdown
  cell without a translation, and puts the current English beside each stale one.
* ``accept --language L CASE… [--cell ID…]`` / ``accept --language L --strings [--key KEY…]``:
  after revising translations, records that they translate the current English (``--strings``:
  the words of every folder, the shared ones and each room's).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from ..course import COURSE_DIR, select_cases
from ..units import ParameterError
from .common import EXIT_OK, EXIT_PROBLEM

#: How many ids a line lists before it says "and N more".
_SHOWN = 12


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOWN])
    return shown + (f", … and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")


def _languages(asked: str | None, strings_dir: Path | None = None) -> list[str]:
    from .. import i18n

    if asked:
        return [i18n.translation_language(asked, strings_dir)]
    return i18n.translation_languages()


def _check(args: argparse.Namespace) -> int:
    from .. import i18n

    reports = [i18n.check(lang, course_dir=args.course_dir, strings_dir=args.strings_dir)
               for lang in _languages(args.language, args.strings_dir)]
    if args.json:
        print(json.dumps([r.to_json() for r in reports], indent=2, ensure_ascii=False))
    for report in reports if not args.json else ():
        print(f"language {report.language}")
        for case in report.cases:
            state = (f"{case.translated}/{case.total} cells, "
                     f"{case.words.translated}/{case.words.total} words translated")
            print(f"  {case.case_id:<28} {state}")
            if case.error:
                print(f"    unreadable: {case.error}")
            for what in ("stale", "orphan", "missing"):
                ids = getattr(case, what)
                if ids:
                    print(f"    {what} ({len(ids)}): {_ids(ids)}")
            _print_words(case.words, "    words ")
        s = report.strings
        print(f"  {'shared strings':<28} {s.translated}/{s.total} keys translated")
        _print_words(s, "    ")
        verdict = "ok" if report.ok(args.strict) else "needs work"
        print(f"  {report.n_stale} stale, {report.n_orphan} orphaned, {report.n_missing} missing: {verdict}")
    return EXIT_OK if all(r.ok(args.strict) for r in reports) else EXIT_PROBLEM


def _print_words(s, indent: str) -> None:
    for what, ids in (("stale", s.stale), ("orphan (not in en.json)", s.extra),
                      ("placeholders differ from the English", s.placeholders), ("missing", s.missing)):
        if ids:
            print(f"{indent}{what} ({len(ids)}): {_ids(ids)}")


def _stub(args: argparse.Namespace) -> int:
    from .. import i18n

    language = _languages(args.language, args.strings_dir)[0]
    for case_id in select_cases(",".join(args.cases), args.course_dir):
        path, changed = i18n.stub(case_id, language, args.course_dir)
        print(f"{path}: {changed} entr{'y' if changed == 1 else 'ies'} to translate added or updated")
    return EXIT_OK


def _accept(args: argparse.Namespace) -> int:
    from .. import i18n

    language = _languages(args.language, args.strings_dir)[0]
    if args.strings:
        if args.cases or args.cell:
            raise ParameterError("--strings", "with cases", "either --strings [--key …] or CASE… [--cell …]")
        keys = i18n.accept_strings(language, args.key or (), args.strings_dir)
        print(f"{language}.sources.json: {len(keys)} key(s) accepted")
        return EXIT_OK
    if not args.cases or args.key:
        raise ParameterError("accept", " ".join(args.cases), "CASE… [--cell ID…], or --strings [--key KEY…]")
    cases = select_cases(",".join(args.cases), args.course_dir)
    if args.cell and len(cases) != 1:
        raise ParameterError("--cell", " ".join(args.cell), "cell ids of one case")
    for case_id in cases:
        accepted = i18n.accept_cells(case_id, language, args.cell or (), args.course_dir)
        print(f"{i18n.translation_path(case_id, language, args.course_dir)}: {len(accepted)} cell(s) accepted")
    return EXIT_OK


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="tcplab i18n", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course-dir", type=Path, default=COURSE_DIR)
    common.add_argument("--strings-dir", type=Path, default=None, help=argparse.SUPPRESS)

    check = sub.add_parser("check", parents=[common], help="list stale, orphaned and missing translations")
    check.add_argument("--language", default=None, help="one language (default: every translation)")
    check.add_argument("--strict", action="store_true", help="missing translations fail too")
    check.add_argument("--json", action="store_true", help="the findings as JSON")

    stub = sub.add_parser("stub", parents=[common], help="add entries to translate to a case's translation file")
    stub.add_argument("--language", required=True)
    stub.add_argument("cases", nargs="+", metavar="CASE", help="numbers or names, e.g. 05 or 05-zero-window")

    accept = sub.add_parser("accept", parents=[common],
                            help="record that revised translations translate the current English")
    accept.add_argument("--language", required=True)
    accept.add_argument("cases", nargs="*", metavar="CASE")
    accept.add_argument("--cell", nargs="+", default=None, metavar="ID", help="only these cells (of one case)")
    accept.add_argument("--strings", action="store_true", help="the words (shared and each room's) instead of cases' cells")
    accept.add_argument("--key", nargs="+", default=None, metavar="KEY", help="only these keys")

    args = parser.parse_args(list(argv))
    return {"check": _check, "stub": _stub, "accept": _accept}[args.action](args)
