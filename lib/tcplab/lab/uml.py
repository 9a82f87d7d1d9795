"""A second, real kernel for the lab: User-mode Linux (UML), booted as an ordinary process.

Debian's ``user-mode-linux`` package is a Linux kernel (6.1 in bookworm) built to run as a
user process, with netem and the lab's other modules beside it. Booted with the host's own
filesystem as its root (hostfs), it runs this project's Python, tcpdump, ss, ip and tc
unchanged; it needs neither root on the host nor virtualization hardware.

One agent process inside (:mod:`tcplab.lab.agent`) does what the host asks, through
:class:`tcplab.lab.agent_kernel.AgentKernel`: calls in, answers out, a watchdog and a record
so that nothing outlives its owner. One boot serves many runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import agent_kernel
from .agent_kernel import AgentError, AgentKernel, AgentTimeout, run_command  # noqa: F401  (tcplab uml run)

#: Modules the lab cannot do without; a kernel that cannot load one is refused at boot.
REQUIRED_MODULES = ("veth", "sch_netem", "sch_tbf")
#: Modules the lab uses when there: the AQM qdiscs (``aqm``), bbr, IPv6 captures, the delay
#: line's NFQUEUE rules, the iptables matches of case 08 (iptables-nft needs nf_tables and nft_compat underneath).
WANTED_MODULES = ("sch_htb", "sch_fq_codel", "sch_cake", "tcp_bbr", "ipv6", "nf_tables", "nft_compat", "nfnetlink_queue", "xt_NFQUEUE",
                  "xt_statistic", "xt_tcpudp", "xt_u32", "iptable_raw", "iptable_filter", "ip6table_raw",
                  "ip6table_filter")
#: Real-time (round-robin) priority of the UML kernel's processes where the user may set one
#: (root; 0: none). A kernel's timers run before user work; as host processes, UML's waited for
#: a CPU behind ordinary load instead: beside a busy loop on one of two cores its processes
#: waited 59–111 ms per second of a run (case 04; case 00 too busy to judge), real-time 2–3 ms
#: (both passed). Niceness -10 changed nothing (164 vs 167 ms/s). The kernel's real-time
#: throttling (95 % of each second) keeps the host responsive whatever UML does.
UML_RT_PRIORITY = 1


class UmlError(AgentError):
    """The UML kernel is missing, cannot boot, or died; the message says what to do."""


class UmlTimeout(UmlError, AgentTimeout):
    """The UML kernel did not answer in time; it was killed."""


# --- where the kernel is -----------------------------------------------------------------------

@dataclass(frozen=True)
class UmlInstall:
    """A User-mode Linux kernel and its modules."""

    binary: Path
    modules: Path  # …/modules/<release>
    modprobe: Path
    fetched: bool = False  # unpacked into the user's cache rather than installed system-wide

    @property
    def release(self) -> str:
        return self.modules.name


def cache_dir() -> Path:
    """Where a kernel fetched without root is unpacked, and the preload built:
    $TCPLAB_UML_CACHE or ~/.cache/tcplab/uml; where the home cannot be written (a read-only
    home in a container, a locked-down account), /tmp/tcplab-<uid>/cache/uml, said once."""
    if env := os.environ.get("TCPLAB_UML_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    preferred = Path(base) / "tcplab" / "uml"
    if _writable(preferred):
        return preferred
    fallback = Path(tempfile.gettempdir()) / f"tcplab-{os.getuid()}" / "cache" / "uml"
    if not _said_fallback:
        _said_fallback.append(fallback)
        print(f"tcplab: {base} cannot be written by this user (uid {os.getuid()}): the UML kernel's files "
              f"go to {fallback} instead", file=sys.stderr, flush=True)
    return fallback


_said_fallback: list[Path] = []


def _writable(folder: Path) -> bool:
    """Whether ``folder`` can be written, or made (its nearest existing parent can be written)."""
    while not folder.exists():
        if folder.parent == folder:
            return False
        folder = folder.parent
    return os.access(folder, os.W_OK)


#: Preloaded into the UML kernel's process where the host's XSAVE area outgrows UML's FPU buffer
#: (CPUs with AMX): without it every register restore fails and UML kills init at boot.
XSTATE_SOURCE = Path(__file__).with_name("uml_xstate.c")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next((set(line.split(":", 1)[1].split()) for line in cpuinfo if line.startswith("flags")), set())
    except OSError:
        return set()


def xstate_preload() -> Path | None:
    """:data:`XSTATE_SOURCE` built for this machine, once, into :func:`cache_dir` (named by the
    source's hash, written atomically so two boots may build it at once). None where no C
    compiler is found and the CPU has no AMX, whose XSAVE area Debian's UML 6.1 cannot hold;
    with AMX and no compiler UML cannot boot, and the error says what to install."""
    import hashlib

    source = XSTATE_SOURCE.read_bytes()
    target = cache_dir() / f"xstate-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if target.is_file():
        return target
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        if any(flag.startswith("amx") for flag in _cpu_flags()):
            raise UmlError("this CPU has AMX, whose register area is larger than the UML kernel's; the UML kernel "
                           f"boots here only with a small preload built from {XSTATE_SOURCE.name}, and no C compiler "
                           "(cc) was found to build it: apt-get install gcc (make setup does it), or set CC")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    building = target.with_name(f".{target.name}.{os.getpid()}")
    built = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(building), str(XSTATE_SOURCE), "-ldl"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        building.unlink(missing_ok=True)
        raise UmlError(f"building the UML kernel's preload from {XSTATE_SOURCE} with {compiler} failed:\n"
                       + built.stderr.strip())
    os.replace(building, target)
    return target


def _modprobe(root: Path) -> Path | None:
    for candidate in (root / "usr/bin/kmod", root / "bin/kmod"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_install() -> UmlInstall | None:
    """The system's UML kernel (package ``user-mode-linux``), else one fetched into :func:`cache_dir`."""
    for root, fetched in ((Path("/"), False), (cache_dir(), True)):
        binary = root / "usr/bin/linux.uml"
        modules_root = root / "usr/lib/uml/modules"
        kmod = _modprobe(root) or _modprobe(cache_dir())
        if not (binary.is_file() and os.access(binary, os.X_OK) and modules_root.is_dir()):
            continue
        releases = sorted(p for p in modules_root.iterdir() if (p / "modules.dep").exists())
        if releases and kmod is not None:
            return UmlInstall(binary, releases[-1], kmod, fetched)
    return None


#: A child asks to be traced and stops; the parent, its tracer, lets it go on: what UML does with
#: every process it runs. Exit 0 when the host allows it, else the errno of the refusal.
_PTRACE_PROBE = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    if libc.ptrace(0, 0, None, None) != 0:  # PTRACE_TRACEME
        os._exit(100 + ctypes.get_errno())
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
_, status = os.waitpid(child, os.WUNTRACED)
if os.WIFSTOPPED(status):
    libc.ptrace(7, child, None, None)  # PTRACE_CONT
    _, status = os.waitpid(child, 0)
sys.exit(os.WEXITSTATUS(status))
"""


def ptrace_allowed() -> tuple[bool, str]:
    """Whether this machine lets a process trace its own children, as the UML kernel must (a
    container's seccomp profile or ``kernel.yama.ptrace_scope`` = 3 forbid it), and if not, why."""
    if _ptrace_answer:
        return _ptrace_answer[0]
    done = subprocess.run([sys.executable, "-S", "-c", _PTRACE_PROBE], capture_output=True, text=True, timeout=30)
    if done.returncode == 0:
        answer = (True, "")
    else:
        import errno

        code = done.returncode - 100
        what = errno.errorcode.get(code, f"exit {done.returncode}")
        reasons = []
        try:
            if Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip() == "3":
                reasons.append("kernel.yama.ptrace_scope is 3")
        except OSError:
            pass
        status = Path("/proc/self/status").read_text()
        if any(line.split()[1:] == ["2"] for line in status.splitlines() if line.startswith("Seccomp:")):
            reasons.append("this process runs under a seccomp filter (a container's profile)")
        answer = (False, f"no ptrace: the UML kernel traces its own processes, and this machine refused "
                         f"PTRACE_TRACEME ({what}{'; ' + '; '.join(reasons) if reasons else ''})")
    _ptrace_answer.append(answer)
    return answer


_ptrace_answer: list[tuple[bool, str]] = []


#: Why ``--kernel uml`` was refused where no UML kernel is installed, and how to install one
#: (a phrase with placeholders, so that a page speaking another language can say it).
INSTALL_HINT = ("{why}; install it as root with `apt-get install user-mode-linux kmod` (`make setup` does it), "
                "or without root with `tcplab uml fetch`, which unpacks the same Debian packages into {folder}")


def missing_message() -> str:
    return ("no User-mode Linux kernel found (it runs the lab as a second kernel, without root). "
            "As root: apt-get install user-mode-linux kmod (make setup does it). Without root: "
            "`tcplab uml fetch` unpacks the same Debian packages into " + str(cache_dir()))


def fetch_install(dest: Path | None = None, *, echo: Callable[[str], None] = print) -> UmlInstall:
    """Fetch Debian's ``user-mode-linux`` and ``kmod`` packages without root (``apt-get
    download`` + ``dpkg-deb -x``) into ``dest`` (default :func:`cache_dir`)."""
    dest = dest or cache_dir()
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise UmlError("fetching the UML kernel needs apt-get and dpkg-deb (a Debian or Ubuntu system); "
                       + missing_message())
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tcplab-uml-fetch-") as tmp:
        for package in ("user-mode-linux", "kmod"):
            echo(f"tcplab: fetching the Debian package {package} (no root needed) into {dest}")
            done = subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True, text=True)
            if done.returncode != 0:
                raise UmlError(f"apt-get download {package} failed: {done.stderr.strip()[-400:]}")
        for deb in sorted(Path(tmp).glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    found = find_install()
    if found is None:
        raise UmlError(f"the fetched packages in {dest} hold no usable kernel; " + missing_message())
    return found


# --- the kernel --------------------------------------------------------------------------------

_INIT = """#!/bin/sh
# tcplab: init of a User-mode Linux lab kernel (written by tcplab.lab.uml, removed after).
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
ip link set lo up
stty -echo 2>/dev/null
mkdir -p /run/tcplab-modules/lib/modules
ln -s {modules} /run/tcplab-modules/lib/modules/{release}
for m in {required} {wanted}; do
  if {modprobe} -d /run/tcplab-modules $m 2>/dev/null; then echo "$m" >> /run/tcplab-modules/loaded
  else echo "$m" >> /run/tcplab-modules/failed; fi
done
echo 1 > /proc/sys/kernel/sysrq
cd {cwd}
exec {python} -m tcplab.lab.agent {workdir}
"""



class UmlKernel(AgentKernel):
    """One booted UML kernel and its agent. ``call(fn, …)`` runs ``fn`` inside it."""

    kind = "uml"
    title = "the UML kernel"
    Error = UmlError
    Timeout = UmlTimeout
    rt_priority = UML_RT_PRIORITY

    def __init__(self, *, mem: str = "1G", boot_timeout: float = 120.0, call_timeout: float = 1800.0,
                 install: UmlInstall | None = None) -> None:
        super().__init__(boot_timeout=boot_timeout, call_timeout=call_timeout)
        self.mem = mem
        self.install = install

    def _preflight(self, python: Path) -> None:
        import tcplab

        install = self.install or find_install()
        if install is None:
            raise UmlError(missing_message())
        self.install = install
        traced, why = ptrace_allowed()
        if not traced:
            raise UmlError(why)
        for what, path in (("the kernel", install.binary), ("its modules", install.modules),
                           ("modprobe (package kmod)", install.modprobe), ("Python", python),
                           ("the tcplab package", Path(tcplab.__file__).parent), ("the working folder", Path.cwd())):
            if not os.access(path, os.R_OK | (os.X_OK if what != "its modules" else 0)):
                raise UmlError(f"{what} at {path} cannot be read by this user ({os.getuid()}); the UML kernel "
                               "sees files with the host user's rights. A .venv made from a Python under /root "
                               "cannot be used by other users: `make setup PYTHON=/usr/bin/python3`.")
        # UML keeps its memory in a file under TMPDIR (sparse: only what the kernel touches).
        memdir = memory_dir()
        free = shutil.disk_usage(memdir).free
        need = 256 * 1024 * 1024
        if free < need:
            raise UmlError(f"the UML kernel keeps its memory in {memdir}, which has {free // 2**20} MiB free; "
                           f"it needs at least {need // 2**20} MiB (set TMPDIR to a folder with room)")

    def _command(self, workdir: Path, python: Path) -> tuple[list[str], dict[str, str]]:
        install = self.install
        assert install is not None
        # modprobe is kmod called by that name; a link of ours avoids the package's absolute links.
        modprobe = workdir / "modprobe"
        modprobe.symlink_to(install.modprobe)
        init = workdir / "init.sh"
        init.write_text(_INIT.format(modules=install.modules, release=install.release, modprobe=modprobe,
                                     required=" ".join(REQUIRED_MODULES), wanted=" ".join(WANTED_MODULES),
                                     cwd=_quote(os.getcwd()), python=_quote(str(python)), workdir=_quote(str(workdir))))
        init.chmod(0o755)
        argv = [str(install.binary), f"mem={self.mem}", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "rw",
                f"init={init}", "con=null", "con0=fd:0,fd:1", "quiet", f"umid={self.umid}", f"uml_dir={workdir}"]
        preload = xstate_preload()
        # TMPDIR always set: without it UML puts its memory file in /dev/shm, which a container
        # keeps small (64 MB by default), and the kernel dies of SIGBUS once it grows past it.
        return argv, {"TMPDIR": str(memory_dir()), **({"LD_PRELOAD": str(preload)} if preload else {})}

    def _after_boot(self) -> None:
        missing = [m for m in REQUIRED_MODULES if m not in self.info.get("modules_loaded", [])]
        if missing:
            self.stop()
            raise UmlError(f"the UML kernel {self.info.get('release')} could not load {', '.join(missing)} "
                           f"from {self.install.modules if self.install else '?'}; the lab needs them")


def memory_dir() -> str:
    """Where the UML kernel keeps its memory file: $TMPDIR, else the system's temporary folder."""
    return os.environ.get("TMPDIR") or tempfile.gettempdir()


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# --- one kernel per process ----------------------------------------------------------------------

def shared_kernel() -> UmlKernel:
    """The process's UML kernel, booted on first use and powered off at exit: a case's runs
    and a notebook's paths all go to one boot."""
    return agent_kernel.shared("uml", lambda: UmlKernel(mem=os.environ.get("TCPLAB_UML_MEM", "1G")))


def shutdown_shared() -> None:
    agent_kernel.shutdown_shared("uml")
