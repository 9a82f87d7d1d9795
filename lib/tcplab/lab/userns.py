"""The host's own kernel without root: the lab in a user namespace of the learner's own.

An unprivileged user may create a user namespace (where the kernel allows it) and is then
root of the namespaces made from inside it: network namespaces, veths, addresses, routes,
qdiscs, iptables rules, NFQUEUE, raw sockets for tcpdump, per-namespace sysctls. The lab
therefore runs on the host's kernel, at the host's speed, with an agent process
(:mod:`tcplab.lab.agent`) started as::

    unshare --user --map-user=UID --map-group=GID --keep-caps --mount --propagation private \\
            --pid --fork --kill-child --mount-proc -- sh init.sh

The user keeps their own uid inside (files the lab writes are theirs) and the capabilities
of the namespace's root as *ambient* ones, which every program the agent starts inherits:
tcpdump then runs as an ordinary user with CAP_NET_RAW, where as uid 0 it would try to drop
to the ``tcpdump`` user, which a user namespace cannot map. The agent stays in the host's
network namespace (it reads host-global values there, read-only) and builds the lab's
namespaces under a private ``/run`` (``/run/netns``), so no other user sees them. Its own
PID namespace ends every process of the lab when the agent ends, however it ended; the
namespaces then go with the last process that held them.

What a user namespace cannot do: change host-global settings (``net.core.wmem_max`` and
``rmem_max``, ``net.ipv4.tcp_mem``, ``tcp_allowed_congestion_control``; the first two are
visible in every namespace but writable only by the host's root), load kernel modules
(netem works where the kernel has ``sch_netem`` loaded or can load it by itself; otherwise
the delay line runs), and read tracefs. :func:`host_global_blockers` names what a path
would need of the first kind; :mod:`tcplab.lab.kernels` then runs that path in the UML
kernel or says why it cannot.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping

from . import agent_kernel
from .agent_kernel import AgentError, AgentKernel, AgentTimeout

#: The host's programs the lab runs inside the namespace.
TOOLS = ("unshare", "ip", "tc", "iptables", "tcpdump")
#: Linux capabilities the agent must hold inside its namespace (see capabilities(7)):
#: CAP_NET_ADMIN (12), CAP_NET_RAW (13), CAP_SYS_ADMIN (21: mounts, setns).
NEEDED_CAPS = {"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_SYS_ADMIN": 21}


class UsernsError(AgentError):
    """No user-namespace lab here, or it died; the message says what is missing."""


class UsernsTimeout(UsernsError, AgentTimeout):
    """The user-namespace lab did not answer in time; it was ended."""


#: Who root is inside its own user namespace lab (root may take this road too, for benchmarks
#: and comparisons): any uid but 0 there, so that tcpdump keeps its capabilities (nobody's).
ROOT_INSIDE = 65534


def unshare_argv() -> list[str]:
    """The ``unshare`` command that makes the lab's namespaces for this user (who keeps their
    own uid inside; root becomes :data:`ROOT_INSIDE`)."""
    uid, gid = os.getuid() or ROOT_INSIDE, os.getgid() or ROOT_INSIDE
    return ["unshare", "--user", f"--map-user={uid}", f"--map-group={gid}", "--keep-caps",
            "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--mount-proc", "--"]


#: Run first in the new namespaces: a private /run (the host's entries bound back, except
#: netns and tcplab, which become the lab's own), then the agent.
_INIT = """#!/bin/sh
# tcplab: set-up of a user-namespace lab (written by tcplab.lab.userns, removed after).
set -e
keep={keep}
mkdir -p "$keep"
mount --rbind /run "$keep"
mount -t tmpfs -o mode=755 tcplab-run /run
for entry in "$keep"/* "$keep"/.[!.]*; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  name=${{entry##*/}}
  case "$name" in netns|tcplab) continue ;; esac
  if [ -L "$entry" ]; then cp -P "$entry" "/run/$name"
  elif [ -d "$entry" ]; then mkdir -p "/run/$name" && mount --rbind "$entry" "/run/$name"
  else touch "/run/$name" && mount --bind "$entry" "/run/$name"; fi
done
umount -l "$keep"
rmdir "$keep"
mkdir -p /run/netns /run/tcplab
cd {cwd}
exec {python} -m tcplab.lab.agent {workdir}
"""

#: What the probe does in fresh namespaces: the steps a lab takes, each named when it fails.
#: (Not ``ip netns add``: it returns to the namespace it came from, the host's, which a user
#: namespace may not enter; the lab creates its namespaces as pyroute2 does, in a child.)
_PROBE = """set -u
step() { what=$1; shift; out=$("$@" 2>&1) || { echo "FAILED $what: $out"; exit 1; }; }
step "mounting a private /run" mount -t tmpfs tcplab-probe /run
step "making a network namespace" sh -c 'mkdir /run/netns && touch /run/netns/p && unshare --net=/run/netns/p true'
step "adding a veth pair" ip -n p link add name probe0 type veth peer name probe1
step "adding tbf" ip netns exec p tc qdisc add dev probe0 root tbf rate 10mbit burst 10k limit 100k
step "adding an iptables NFQUEUE rule" ip netns exec p iptables -w -t raw -A PREROUTING -j NFQUEUE --queue-num 9
step "bringing a link up" ip -n p link set probe0 up
step "opening a capture (tcpdump)" ip netns exec p timeout --preserve-status -s INT 0.3 tcpdump -i probe0 -w /dev/null
echo OK
"""


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _seccomp_filtered() -> bool:
    status = _read("/proc/self/status") or ""
    return any(line.split()[1:] == ["2"] for line in status.splitlines() if line.startswith("Seccomp:"))


def blocked_by() -> list[str]:
    """The settings of this machine that forbid an unprivileged user namespace, named."""
    found = []
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        found.append("user.max_user_namespaces is 0")
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        found.append("kernel.unprivileged_userns_clone is 0")
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        found.append("AppArmor restricts unprivileged user namespaces "
                     "(kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later)")
    if _seccomp_filtered():
        found.append("this process runs under a seccomp filter (a container's profile usually forbids "
                     "unshare(CLONE_NEWUSER))")
    return found


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str]:
    """Whether this user can run the lab in a user namespace here, and if not, why in words
    (the step that failed, and the machine's settings that explain it). Takes ~0.1 s, once."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return False, "missing " + ", ".join(missing)
    try:
        done = subprocess.run([*unshare_argv(), "sh", "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare could not run ({exc})"
    said = (done.stdout + done.stderr).strip()
    if done.returncode == 0 and said.endswith("OK"):
        return True, ""
    reasons = blocked_by()
    why = next((line[len("FAILED "):] for line in said.splitlines() if line.startswith("FAILED ")), None)
    if why is None:  # unshare itself failed: the namespace was never made
        why = "no user namespace: " + (said.splitlines()[-1] if said else f"unshare exited {done.returncode}")
    return False, why + (f" ({'; '.join(reasons)})" if reasons else "")


class UsernsKernel(AgentKernel):
    """The lab's agent in a user namespace of this user's, on the host's kernel."""

    kind = "userns"
    title = "the user-namespace lab"
    Error = UsernsError
    Timeout = UsernsTimeout

    def __init__(self, *, boot_timeout: float = 60.0, call_timeout: float = 1800.0) -> None:
        super().__init__(boot_timeout=boot_timeout, call_timeout=call_timeout)

    @property
    def host_pgid(self) -> None:
        """None: the lab's processes are the host kernel's own, scheduled as the notebook's are,
        so a run's health reads the delay line's lateness and the CPU's pressure, not a
        separate kernel's wait for a CPU as with UML."""
        return None

    def agent_pid(self) -> int | None:
        """The agent's process id on the host (unshare's child; 1 inside its PID namespace)."""
        from .state import processes

        unshare = self._record.pgid() if self._record is not None else None
        return next((pid for pid, fields in processes() if unshare and int(fields[1]) == unshare), None)

    def shell(self, ns: str) -> list[str] | None:
        """A command that opens a shell in the lab's namespace ``ns`` from the user's own shell:
        into the user namespace and the agent's mounts, then that network namespace. The
        shell holds no capability (a user namespace gives none across exec to a non-root
        uid): enough to look (ss, ip, tc -s), not to change."""
        pid = self.agent_pid()
        if pid is None:
            return None
        return ["nsenter", "-t", str(pid), "--user", "--mount", "--preserve-credentials",
                f"--net=/proc/{pid}/root/run/netns/{ns}", "bash"]

    def _preflight(self, python: Path) -> None:
        ok, why = probe()
        if not ok:
            raise UsernsError(f"the host kernel cannot run the lab in a user namespace for this user: {why}")

    def _command(self, workdir: Path, python: Path) -> tuple[list[str], dict[str, str]]:
        init = workdir / "init.sh"
        init.write_text(_INIT.format(keep=shlex.quote(str(workdir / "host-run")), cwd=shlex.quote(os.getcwd()),
                                     python=shlex.quote(str(python)), workdir=shlex.quote(str(workdir))))
        # The lab's state (namespace owners, the delay line's work files) in the private /run.
        return [*unshare_argv(), "/bin/sh", str(init)], {"TCPLAB_STATE_DIR": "/run/tcplab"}


def shared_kernel() -> UsernsKernel:
    """The process's user-namespace lab, started on first use (about 0.5 s) and ended at exit."""
    return agent_kernel.shared("userns", UsernsKernel)


def shutdown_shared() -> None:
    agent_kernel.shutdown_shared("userns")


# --- what a path needs of the host that a user namespace cannot give ---------------------------------

def host_global_blockers(wanted: Mapping[str, Any], in_force: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """{key: (wanted, in force)} for each host-global setting a path wants changed: a user
    namespace can read these but not write them. A value equal to the one in force needs no
    change (a machine whose wmem_max is already large enough runs the path as it is)."""
    from .sysctl import format_value

    return {key: (format_value(value), in_force.get(key, "?")) for key, value in wanted.items()
            if " ".join(format_value(value).split()) != " ".join(str(in_force.get(key, "")).split())}


def blockers_text(blockers: Mapping[str, tuple[str, str]]) -> str:
    """The blockers, from the value now to the one wanted: "net.core.wmem_max 212992 → 262144"
    (names and numbers only, so a sentence in any language can hold them)."""
    return ", ".join(f"{key} {now} → {wanted}" for key, (wanted, now) in blockers.items())
