"""``tcplab report`` / ``make report``: run the course's case notebooks and render its pages.

Runs the selected cases (or one shard of them) live or replayed, or renders what already ran
(``--render-only``), or merges shards run elsewhere (``--merge``); then writes
``summary.json`` and exits 0, 1 (a case failed), or 4 (none failed, some too busy to trust).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from ..course import COURSE_DIR, PROFILES, REPORTS_DIR, select_cases
from ..files import write_atomically
from ..lab.kernels import KERNELS, MODE_CHOICES, choose_mode
from ..report.exercises import EXERCISES
from ..units import ParameterError
from ..words import speaking
from .common import EXIT_BUSY, EXIT_OK, EXIT_PROBLEM, language_option


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="tcplab report",
                                     description="Run the course's case notebooks and render reports/.")
    parser.add_argument("--cases", default=None, help="all, or e.g. 00,01,04 (default: all)")
    parser.add_argument("--profile", default=None, choices=PROFILES,
                        help="quick (default) or full; with --render-only, the one the notebooks ran with")
    parser.add_argument("--edition", default="instructor", choices=("student", "instructor"))
    parser.add_argument("--exercises", default=None, choices=EXERCISES,
                        help="run (default) or skip: skip runs each case's own runs, checks and answers, not its "
                             "exercises (a quicker check of a kernel); with --render-only, as the notebooks ran")
    parser.add_argument("--mode", default="auto", choices=MODE_CHOICES)
    parser.add_argument("--kernel", default="auto", choices=KERNELS,
                        help="kernel that runs the lab: host (needs root), uml (User-mode Linux, no root), auto")
    parser.add_argument("--fresh", action="store_true", help="rerun experiments even when recorded runs match")
    parser.add_argument("--render-only", action="store_true",
                        help="re-render from already executed notebooks in reports/, run nothing")
    parser.add_argument("--shard", metavar="I/N", default=None,
                        help="run only shard I (1 to N) of N of the selected cases, into its own --reports-dir "
                             "(one job of a CI matrix, Kubernetes Indexed Job or Slurm array); then --merge")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="DIR", default=None,
                        help="render the handout and summary.json into --reports-dir from the directories "
                             "of every shard's run, running nothing")
    parser.add_argument("--language", default=None, metavar="LANG",
                        help="language of the pages and of what the notebooks write: en, zh, … (a strings file "
                             "in tcplab/strings/; default: $TCPLAB_LANG, else en); Markdown cells without a fresh "
                             "translation stay English (tcplab i18n check)")
    parser.add_argument("--formats", default="html,pdf")
    parser.add_argument("--reports-dir", type=Path, default=REPORTS_DIR)
    parser.add_argument("--course-dir", type=Path, default=COURSE_DIR,
                        help="the course: course.toml and a folder per case (default: course/)")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="with --render-only: write the pages here (e.g. a student edition beside "
                             "the instructor one); default: --reports-dir")
    args = parser.parse_args(list(argv))

    from ..report import pipeline as report

    language = language_option(args.language)
    with speaking(language):  # its errors too, not only its pages, in the language asked for
        formats = report.check_formats(f.strip() for f in args.formats.split(",") if f.strip())
        return _report(args, formats, language)


def _report(args: argparse.Namespace, formats: list[str], language: str) -> int:
    from ..report import pipeline as report
    from ..report.shards import Shard, merge

    if args.merge:
        clashing = [name for name, given in (("--cases", args.cases is not None), ("--shard", args.shard),
                                              ("--render-only", args.render_only), ("--fresh", args.fresh),
                                              ("--exercises", args.exercises))
                    if given]
        if clashing:
            raise ParameterError("--merge", " ".join(map(str, args.merge)),
                                 "--merge with --edition, --formats, --language and --reports-dir only",
                                 f"{', '.join(clashing)} belong to the shards' runs")
        result = merge(args.merge, output_dir=args.reports_dir, course_dir=args.course_dir,
                       edition=args.edition, formats=formats, language=language)
        if result.origin["missing_shards"]:
            print(f"tcplab report: shard(s) {', '.join(result.origin['missing_shards'])} missing: "
                  "their cases did not run", file=sys.stderr)
        return _finish(result, args.reports_dir)
    cases = select_cases(args.cases or "all", args.course_dir)
    shard = Shard.parse(args.shard) if args.shard is not None else None
    origin = {}
    if shard is not None:
        if args.render_only:
            raise ParameterError("--shard", args.shard, "--shard to run cases", "--render-only runs nothing")
        origin = shard.record(cases)
        cases = shard.pick(cases)
    # Refused before the reports folder is made: live mode where no kernel can run the lab.
    mode = None if args.render_only else choose_mode(args.mode, args.kernel, parameter="MODE")
    if not args.render_only:
        args.profile = args.profile or "quick"
    args.reports_dir.mkdir(parents=True, exist_ok=True)
    if args.render_only:
        result = report.render_only(cases, reports_dir=args.reports_dir, output_dir=args.output_dir,
                                    course_dir=args.course_dir,
                                    edition=args.edition, formats=formats, profile=args.profile,  # None: as recorded
                                    exercises=args.exercises, language=language)
    else:
        part = f", shard {shard.label}" if shard else ""
        exercises = args.exercises or "run"
        print(f"tcplab report: {len(cases)} case(s){part}, profile {args.profile}, exercises {exercises}, "
              f"edition {args.edition}, language {language}, mode {mode.mode} ({mode.where})", flush=True)
        result = report.build_report(
            cases, course_dir=args.course_dir, reports_dir=args.reports_dir,
            parameters={"fresh": bool(args.fresh), "kernel": args.kernel}, profile=args.profile, edition=args.edition,
            mode=mode.mode, formats=formats, progress=True, language=language, exercises=exercises,
        )
        result.origin = origin
    out_dir = args.output_dir if args.render_only and args.output_dir else args.reports_dir
    return _finish(result, out_dir)


def _finish(result, out_dir: Path) -> int:
    """Write the summary, say how it went, and give ``tcplab report``'s exit status."""
    from ..report.pipeline import SUMMARY

    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(out_dir / SUMMARY, json.dumps(result.to_json(), indent=2))
    print(result.summary())
    for fmt, path in result.handout.items():
        print(f"handout ({fmt}): {path}")
    for fmt, path in result.cheatsheet.items():
        print(f"cheat sheet ({fmt}): {path}")
    for fmt, path in result.glossary.items():
        print(f"glossary ({fmt}): {path}")
    if not result.none_failed:
        print("tcplab report: some cases failed or did not reproduce (see the summary above)", file=sys.stderr)
        return EXIT_PROBLEM
    if not result.rendered_ok:
        return EXIT_PROBLEM
    if result.busy:
        print(f"tcplab report: the machine was too busy for {', '.join(result.busy)}: their results are not trusted "
              f"(the page says which runs and why); run them again on a quieter machine", file=sys.stderr)
        return EXIT_BUSY
    return EXIT_OK
