"""Remove what crashed or killed runs left behind, and restore host settings.

Safe to run at any time: a namespace that belongs to a live run (its owner process still
alive) is left alone unless ``force`` is given.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from . import netns, state, sysctl, tracefs


@dataclass
class CleanupReport:
    namespaces: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    host_restored: dict[str, str] = field(default_factory=dict)
    trace_instances: list[str] = field(default_factory=list)
    uml_instances: list[str] = field(default_factory=list)
    userns_instances: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.namespaces or self.processes or self.host_restored or self.trace_instances
                    or self.uml_instances or self.userns_instances)

    def lines(self) -> list[str]:
        out = [f"removed namespace {n}" for n in self.namespaces]
        out += [f"stopped process {p}" for p in self.processes]
        out += [f"restored {k} = {v}" for k, v in self.host_restored.items()]
        out += [f"removed trace instance {t}" for t in self.trace_instances]
        out += [f"ended UML kernel {u} (its owner was gone)" for u in self.uml_instances]
        out += [f"ended user-namespace lab {u} (its owner was gone)" for u in self.userns_instances]
        out += [f"left alone (run still alive): {n}" for n in self.skipped_live]
        return out or ["nothing to clean"]


def owner_alive(name: str) -> bool:
    """Whether the namespace's recorded owner is another process that is still running."""
    owner = netns.owner_of(name)
    if owner is None or owner == os.getpid():
        return False
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        return False
    return True


def cleanup(prefix: str = netns.PREFIX, *, force: bool = False) -> CleanupReport:
    """Namespaces, processes, host settings and trace instances of dead runs (as root), and
    this user's lab kernels of their own (UML, user namespaces) whose owner died (as any user:
    their namespaces and processes die with them)."""
    from .agent_kernel import cleanup_orphans

    report = CleanupReport()
    ended = cleanup_orphans()
    report.uml_instances = [r.umid for r in ended if r.kind == "uml"]
    report.userns_instances = [r.umid for r in ended if r.kind == "userns"]
    if os.geteuid() != 0:
        return report
    for name in netns.listed(prefix):
        if not force and owner_alive(name):
            report.skipped_live.append(name)
            continue
        report.processes += netns.kill_all(name)
        netns.remove(name)
        shutil.rmtree(state.WORK_DIR / name, ignore_errors=True)
        report.namespaces.append(name)
    if not report.skipped_live:
        report.host_restored = sysctl.restore_host()
    report.trace_instances = tracefs.cleanup_instances()
    return report
