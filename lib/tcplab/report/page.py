"""What a case notebook shows its reader about its runs: the page's side of a case.

::

    lab = CaseLab(case_id, mode=mode, kernel=kernel, profile=profile, fresh=fresh)
    page = CasePage(lab)
    display(page)                                   # live on which kernel and why, or replayed
    page.say("upload", rtt=rtt_s, took=slow.duration_s)   # a sentence the run fills (prose)
    page.tell("cc_ran", cc="bbr")                   # a note of what ran, in words
    page.publish("Send buffer", checks)             # the scored checks, left for the report

The lab (:class:`tcplab.cases.CaseLab`) gets the runs; the page says what they show, in the page's
language, in the house style of every table and figure (set when the page is made).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Sequence

from ..words import Messages
from . import prose, scores
from .tables import use_house_style

__all__ = ["CasePage"]


class CasePage:
    """The page of one execution of a case: its banner, its sentences and notes, its checks."""

    def __init__(self, lab: Any) -> None:
        from .. import plots

        self.lab = lab
        self.case_id = lab.case_id
        # Every table the notebook shows, written as the pages write numbers, its variants named.
        use_house_style(self.name)
        # Every figure too, from the first: one the notebook makes itself (plt.subplots) before
        # any tcplab plot would otherwise lack the CJK font its translated labels need.
        plots.use_house_style(self.name)

    def name(self, text: str) -> str:
        """``text`` with every variant the lab ran named in words (:meth:`Messages.variant`): a
        label stays the variant's name in run records and on the command line, not on a page."""
        labels = {label.split("#", 1)[0] for label in self.lab.trials}
        if not labels or not isinstance(text, str):
            return text
        t = Messages()
        pattern = _labels_pattern(tuple(sorted(labels, key=len, reverse=True)))
        return pattern.sub(lambda m: t.variant(self.case_id, m.group(0)), text)

    def say(self, name: str, **values: Any) -> None:
        """Show one of this case's sentences (``prose.<case>.<name>``) filled with this run's
        values, each written as its slot's kind says: how a page states a measured number
        (:mod:`tcplab.report.prose`)."""
        prose.say(self.case_id, name, **{k: self.name(v) if isinstance(v, str) else v for k, v in values.items()})

    def tell(self, name: str, **words: Any) -> None:
        """Show one of this case's notes (``note.<case>.<name>``, Markdown) in the page's
        language: what ran, named in words (a congestion control, a backend, settings read back);
        a measured number is said with :meth:`say` instead."""
        from IPython.display import Markdown, display  # only where a notebook runs

        t = Messages()
        if words.get("backend"):  # a code ("delayline"; "delayline,netem" where both ran) in words
            words["backend"] = t.backends(str(words["backend"]))
        words = {k: self.name(v) if isinstance(v, str) else v for k, v in words.items()}
        display(Markdown(t(f"note.{self.case_id}.{name}", **words)))

    def diagnosis(self, diagnosis: Any, *, of: str | None = None) -> None:
        """A run's diagnosis (:class:`tcplab.analysis.diagnose.Diagnosis`) as a page shows it: the
        limit it names and what that means, then its evidence as short bullet points in the page's
        font (each sentence's clauses a point of its own), never one run-on line of code type. What
        the capture lacks (its caveats) is the instructor's (:data:`~.editions.INSTRUCTOR_CLASS`).
        ``of``: the variant it diagnoses (its label, named in words). ``tcplab diagnose`` says it its
        own way."""
        from html import escape

        from IPython.display import HTML, Markdown, display  # only where a notebook runs

        from .editions import INSTRUCTOR_CLASS

        t = Messages()
        head = t("page.diagnosis.head", title=diagnosis.title, explanation=diagnosis.explanation)
        if of:
            head = t("page.diagnosis.of", run=self.name(of), head=head)
        points = [clause.strip() for sentence in diagnosis.sentences if sentence not in diagnosis.caveats
                  for clause in sentence.split(t("diagnosis.evidence_separator").strip()) if clause.strip()]
        display(Markdown("\n".join([head, ""] + [f"- {point}" for point in points])))
        if diagnosis.caveats:
            display(HTML(f'<ul class="{INSTRUCTOR_CLASS}">'
                         + "".join(f"<li>{escape(c)}</li>" for c in diagnosis.caveats) + "</ul>"))

    def note_limits(self, limits: Any, trials: Any = None) -> None:
        """Show :meth:`limits_note` in the instructor's edition: what the lab found, raised and
        restored of this machine's buffer limits is the instructor's to check, not the case's story."""
        from IPython.display import Markdown, display  # only where a notebook runs

        from .editions import INSTRUCTOR_CLASS

        display(Markdown(f'<span class="{INSTRUCTOR_CLASS}">{self.limits_note(limits, trials)}</span>'))

    def limits_note(self, limits: Any, trials: Any = None) -> str:
        """One sentence (Markdown) per socket-buffer limit the variants ask about
        (:meth:`tcplab.cases.buffers.BufferLimits.changes`): the value found, where, which variants
        ran with it raised or lowered, and the value read after the runs."""
        t, lab = Messages(), self.lab
        where = t("buffers.where.replay" if lab.mode == "replay" else
                  "buffers.where.uml" if lab.kernel == "uml" else "buffers.where.host")
        sentences = []
        for change in limits.changes(trials):
            parts = []
            for value, labels in sorted(change.changed.items(), key=lambda item: -item[0]):
                verb = "raised" if value > change.found else "lowered"
                their = "many" if len(labels) > 1 else "one"
                named = [t.variant(self.case_id, label) for label in labels]
                parts.append(t(f"buffers.{verb}_{their}", variants=_variants(named, t), value=value))
            if change.asked is not None and not any(v > change.found for v in change.changed):
                parts.insert(0, t("buffers.enough", asked=change.asked))
            back = (t("buffers.back_same", end=change.after) if change.after == change.found
                    else t("buffers.back_changed", end=change.after, found=change.found))
            sentences.append(t("buffers.sentence", sysctl=change.key, found=change.found, where=where,
                               parts=t("buffers.separator").join(parts), back=back))
        return " ".join(sentences)

    def record_predictions(self) -> None:
        """Record the worksheet as it stands when the first run starts (:mod:`.stamps`), beside
        the notebook: a released notebook calls it right after its worksheet cell, so grading
        scores each prediction as it was written before the run."""
        from IPython.display import Markdown, display  # only where a notebook runs

        from . import stamps

        def stamp() -> None:
            made = stamps.record(self.case_id)
            t = Messages()
            key = ("stamps.unwritten" if made.get("unwritten") else
                   "stamps.recorded" if made["answers"] else "stamps.no_worksheet")
            display(Markdown(t(key, at=made["at"])))

        self.lab.before_first_run(stamp)
        display(Markdown(Messages()("stamps.armed")))

    def environment(self) -> dict[str, str]:
        """Where the numbers come from: this machine, or the one that recorded them."""
        lab = self.lab
        env = scores.default_environment()
        if lab.mode == "replay":
            env["kernel"] = lab.kernels or "unknown"
            env["data"] = "recorded runs (replay)"
        elif lab.kernels:
            env["kernel"] = lab.kernels
        if lab.kernel is not None:
            env["lab kernel"] = f"{lab.kernel} ({lab.kernel_why})"
            if lab.moved:
                reasons = sorted(lab.moved)
                # Said under the scores, each reason in the page's language (scores.moved_lines):
                # one a line, since a reason itself may hold "; ".
                env["moved"] = "\n".join(reasons)
                env["lab kernel"] += "; " + "; ".join(reasons)
        return env

    def publish(self, title: str, checks: Sequence[Any]) -> None:
        """Show the case's scored checks and leave them in the notebook for the report."""
        runs_read, disturbed = self.lab.health()
        scores.publish(self.case_id, title, checks, backend=self.lab.backend, mode=self.lab.mode,
                       environment=self.environment(), runs_read=runs_read, disturbed=disturbed)

    def _repr_markdown_(self) -> str:
        t, lab = Messages(), self.lab
        if lab.mode == "live" and lab.kernel == "uml":
            return t("page.banner.live_uml", why=t.error_phrase(lab.kernel_why), profile=lab.profile)
        if lab.mode == "live":
            return t("page.banner.live", profile=lab.profile)
        return t("page.banner.replay", kernel=t.kernels(lab.kernels) or "?", profile=lab.runs_profile or "?")


@lru_cache(maxsize=64)
def _labels_pattern(labels: tuple[str, ...]) -> re.Pattern[str]:
    """A whole label (and its repetition, ``#2``), never part of a longer word or label."""
    return re.compile(r"(?<![\w#-])(?:%s)(?:#\d+)?(?![\w-])" % "|".join(map(re.escape, labels)))


def _variants(labels: list[str], t: Messages) -> str:
    """"the variant a" or "the variants a, b and c", as the page's language lists names."""
    if len(labels) == 1:
        return t("buffers.variant", names=labels[0])
    names = t("buffers.list_comma").join(labels[:-1]) + t("buffers.list_and") + labels[-1]
    return t("buffers.variants", names=names)
