"""A second, real kernel for the lab: User-mode Linux (UML), booted as an ordinary process.

Debian's ``user-mode-linux`` package is a Linux kernel (6.1 in bookworm) built to run as a
user process, with netem and the lab's other modules beside it. Booted with the host's own
filesystem as its root (hostfs), it runs this project's Python, tcpdump, ss, ip and tc
unchanged; it needs neither root on the host nor virtualization hardware.

One agent process inside (:mod:`tcplab.lab.uml_agent`) does what the host asks: a request
is a call (function and arguments, cloudpickled) written to a work folder both kernels
see; the console carries ``call N`` in and ``done N`` out. The lab's live objects (a path
and its hosts) stay in the agent and travel as references. One boot serves many runs.

Nothing is left behind: a watchdog (``uml_shepherd.py``) kills the instance's whole
process group when its owner exits, however it died, and a record in the user's state
folder lets ``tcplab cleanup`` end an instance whose watchdog was killed too.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import pickle
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..files import write_atomically
from . import state

#: Modules the lab cannot do without; a kernel that cannot load one is refused at boot.
REQUIRED_MODULES = ("veth", "sch_netem", "sch_tbf")
#: Modules the lab uses when there: the AQM qdiscs (``aqm``), bbr, IPv6 captures, the delay
#: line's NFQUEUE rules, the iptables matches of case 08 (iptables-nft needs nf_tables and nft_compat underneath).
WANTED_MODULES = ("sch_htb", "sch_fq_codel", "sch_cake", "tcp_bbr", "ipv6", "nf_tables", "nft_compat", "nfnetlink_queue", "xt_NFQUEUE",
                  "xt_statistic", "xt_tcpudp", "xt_u32", "iptable_raw", "iptable_filter", "ip6table_raw",
                  "ip6table_filter")
#: The prefix of the agent's lines on the console; everything else there is kernel or program output.
PROTOCOL = "tcplab-uml:"
#: Real-time (round-robin) priority of the UML kernel's processes where the user may set one
#: (root; 0: none). A kernel's timers run before user work; as host processes, UML's waited for
#: a CPU behind ordinary load instead: beside a busy loop on one of two cores its processes
#: waited 59–111 ms per second of a run (case 04; case 00 too busy to judge), real-time 2–3 ms
#: (both passed). Niceness -10 changed nothing (164 vs 167 ms/s). The kernel's real-time
#: throttling (95 % of each second) keeps the host responsive whatever UML does.
UML_RT_PRIORITY = 1
#: Environment variables the agent inherits (the rest of the host's environment stays out).
PASSED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "FRESH", "TZ", "NUMBA_DISABLE_JIT")
PASSED_ENV_PREFIX = "TCPLAB_"


class UmlError(RuntimeError):
    """The UML kernel is missing, cannot boot, or died; the message says what to do."""


class UmlTimeout(UmlError):
    """The UML kernel did not answer in time; it was killed."""


class RemoteError(RuntimeError):
    """An exception raised inside the UML kernel that could not travel as itself."""


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
    """Where a kernel fetched without root is unpacked: $TCPLAB_UML_CACHE or ~/.cache/tcplab/uml."""
    if env := os.environ.get("TCPLAB_UML_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tcplab" / "uml"


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


# --- the records tcplab cleanup reads ---------------------------------------------------------

def records_dir() -> Path:
    return state.user_state_dir() / "uml"


@dataclass
class UmlRecord:
    """What ``tcplab cleanup`` needs to end an instance whose owner died."""

    umid: str
    owner: int
    workdir: str
    uid: int = field(default_factory=os.getuid)

    @property
    def file(self) -> Path:
        return records_dir() / f"{self.umid}.json"

    def pgid(self) -> int | None:
        try:
            return int((Path(self.workdir) / "uml.pgid").read_text())
        except (OSError, ValueError):
            return None

    def save(self) -> None:
        write_atomically(self.file, json.dumps(self.__dict__))

    @classmethod
    def all(cls) -> list["UmlRecord"]:
        out = []
        for file in sorted(records_dir().glob("*.json")):
            try:
                out.append(cls(**json.loads(file.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return out

    def end(self) -> bool:
        """Kill the instance's process group (if any is left) and remove its files; True if
        a process was killed."""
        killed = False
        if (pgid := self.pgid()) is not None:
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed = True
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)
        try:
            self.file.unlink()
        except FileNotFoundError:
            pass
        return killed


def cleanup_orphans() -> list[str]:
    """End the UML instances of this user whose owner process is gone; their umids."""
    ended = []
    for record in UmlRecord.all():
        if record.uid != os.getuid() or state.process_alive(record.owner):
            continue
        record.end()
        ended.append(record.umid)
    return ended


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
exec {python} -m tcplab.lab.uml_agent {workdir}
"""


class UmlKernel:
    """One booted UML kernel and its agent. ``call(fn, …)`` runs ``fn`` inside it."""

    def __init__(self, *, mem: str = "1G", boot_timeout: float = 120.0, call_timeout: float = 1800.0,
                 install: UmlInstall | None = None) -> None:
        self.mem = mem
        self.boot_timeout = boot_timeout
        self.call_timeout = call_timeout
        self.install = install
        self.umid = f"tcplab-{os.getpid()}-{secrets.token_hex(3)}"
        self.info: dict[str, Any] = {}
        self.boot_seconds: float | None = None
        self.console: collections.deque[str] = collections.deque(maxlen=400)
        #: Called with every console line that is not the agent's (kernel and program output).
        self.echo: Callable[[str], None] | None = None
        self._proc: subprocess.Popen | None = None
        self._lifeline: int | None = None
        self._console_in: Any = None
        self._workdir: Path | None = None
        self._record: UmlRecord | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._done: set[int] = set()
        self._ready: dict[str, Any] | None = None
        self._eof = False
        self._serial = 0
        self._owner = os.getpid()

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and not self._eof

    @property
    def release(self) -> str:
        return self.info.get("release", "?")

    @property
    def host_pgid(self) -> int | None:
        """The host process group of this kernel's processes (the kernel, its helpers, one per
        address space inside)."""
        return self._record.pgid() if self._record is not None else None

    def __enter__(self) -> "UmlKernel":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "UmlKernel":
        if self.alive:
            return self
        install = self.install or find_install()
        if install is None:
            raise UmlError(missing_message())
        self.install = install
        python = Path(sys.executable)
        self._preflight(install, python)
        work_parent = os.environ.get("TCPLAB_UML_WORKDIR") or tempfile.gettempdir()
        self._workdir = Path(tempfile.mkdtemp(prefix="tcplab-uml-", dir=work_parent))
        self._record = UmlRecord(self.umid, os.getpid(), str(self._workdir))
        self._record.save()
        atexit.register(self.stop)
        try:
            self._boot(install, python)
        except BaseException:
            self.stop()
            raise
        return self

    def _preflight(self, install: UmlInstall, python: Path) -> None:
        """What would make the boot fail, said before anything starts."""
        import tcplab

        for what, path in (("the kernel", install.binary), ("its modules", install.modules),
                           ("modprobe (package kmod)", install.modprobe), ("Python", python),
                           ("the tcplab package", Path(tcplab.__file__).parent), ("the working folder", Path.cwd())):
            if not os.access(path, os.R_OK | (os.X_OK if what != "its modules" else 0)):
                raise UmlError(f"{what} at {path} cannot be read by this user ({os.getuid()}); the UML kernel "
                               "sees files with the host user's rights. A .venv made from a Python under /root "
                               "cannot be used by other users: `make setup PYTHON=/usr/bin/python3`.")
        # UML keeps its memory in a file under TMPDIR (sparse: only what the kernel touches).
        memdir = os.environ.get("TMPDIR") or tempfile.gettempdir()
        free = shutil.disk_usage(memdir).free
        need = 256 * 1024 * 1024
        if free < need:
            raise UmlError(f"the UML kernel keeps its memory in {memdir}, which has {free // 2**20} MiB free; "
                           f"it needs at least {need // 2**20} MiB (set TMPDIR to a folder with room)")

    def _boot(self, install: UmlInstall, python: Path) -> None:
        assert self._workdir is not None
        workdir = self._workdir
        env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_ENV_PREFIX)}
        env["TCPLAB_UML_AGENT"] = "1"
        (workdir / "config.json").write_text(json.dumps({"cwd": os.getcwd(), "env": env,
                                                         "sys_path": [p for p in sys.path if p]}))
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
        read_life, self._lifeline = os.pipe()
        shepherd = Path(__file__).with_name("uml_shepherd.py")
        started = time.monotonic()
        self._proc = subprocess.Popen(
            [sys.executable, "-S", str(shepherd), str(read_life), str(workdir / "uml.pgid"), str(UML_RT_PRIORITY), "--", *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(read_life,),
            start_new_session=True, env={**os.environ, "TMPDIR": os.environ.get("TMPDIR", tempfile.gettempdir()),
                                         **({"LD_PRELOAD": str(preload)} if preload else {})})
        os.close(read_life)
        self._console_in = self._proc.stdin
        threading.Thread(target=self._read_console, name=f"uml-console-{self.umid}", daemon=True).start()
        with self._cond:
            ok = self._cond.wait_for(lambda: self._ready is not None or self._eof, timeout=self.boot_timeout)
        if not ok or self._ready is None:
            why = "did not come up" if not ok else "stopped during boot"
            self.kill()
            raise UmlError(f"the UML kernel {why} within {self.boot_timeout:.0f} s; its last console lines:\n"
                           + self.tail())
        self.info = self._ready
        self.boot_seconds = time.monotonic() - started
        missing = [m for m in REQUIRED_MODULES if m not in self.info.get("modules_loaded", [])]
        if missing:
            self.stop()
            raise UmlError(f"the UML kernel {self.info.get('release')} could not load {', '.join(missing)} "
                           f"from {install.modules}; the lab needs them")

    def _read_console(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        verbose = os.environ.get("TCPLAB_UML_VERBOSE") == "1"
        for raw in self._proc.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if PROTOCOL in line and not line.startswith(PROTOCOL):
                # a program's unfinished line ran into the agent's: keep both
                line, said = line.split(PROTOCOL, 1)
                self._output(line)
                line = PROTOCOL + said
            if line.startswith(PROTOCOL):
                word, _, rest = line[len(PROTOCOL):].strip().partition(" ")
                with self._cond:
                    if word == "ready":
                        self._ready = json.loads(rest)
                    elif word == "done":
                        self._done.add(int(rest))
                    self._cond.notify_all()
                continue
            self._output(line, verbose)
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _output(self, line: str, verbose: bool = False) -> None:
        self.console.append(line)
        if self.echo is not None:
            self.echo(line)
        elif verbose:
            print(f"[uml] {line}", file=sys.__stderr__, flush=True)

    def tail(self, lines: int = 25) -> str:
        return "\n".join(list(self.console)[-lines:]) or "(nothing)"

    def stop(self, timeout: float = 20.0) -> None:
        """Power the kernel off (the agent closes every live path first), then remove its files."""
        if os.getpid() != self._owner:
            return
        atexit.unregister(self.stop)
        if self.alive and self._ready is not None:
            try:
                self._send("quit")
                with self._cond:
                    self._cond.wait_for(lambda: self._eof, timeout=timeout)
            except (OSError, ValueError):
                pass
        self.kill()

    def kill(self) -> None:
        """End the instance at once: close the lifeline (the shepherd kills the process group)."""
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        if self._record is not None:
            self._record.end()  # the group is gone by now; this removes the work folder and record
            self._record = None
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    # --- calls -----------------------------------------------------------------------------------
    def _send(self, line: str) -> None:
        self._console_in.write((line + "\n").encode())
        self._console_in.flush()

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` inside the UML kernel; its result, or its exception raised here."""
        import cloudpickle

        if not self.alive:
            raise UmlError("the UML kernel is not running" + (f"; its last console lines:\n{self.tail()}"
                                                               if self.console else ""))
        assert self._workdir is not None
        with self._lock:
            self._serial += 1
            serial = self._serial
            request = self._workdir / f"call-{serial}.pkl"
            tmp = request.with_suffix(".tmp")
            tmp.write_bytes(cloudpickle.dumps((fn, args, kwargs)))
            os.replace(tmp, request)
            self._send(f"call {serial}")
            limit = timeout or self.call_timeout
            with self._cond:
                answered = self._cond.wait_for(lambda: serial in self._done or self._eof, timeout=limit)
            if serial not in self._done:
                what = f"did not answer within {limit:.0f} s" if not answered else "stopped"
                name = getattr(fn, "__qualname__", repr(fn))
                self.kill()
                error = UmlTimeout if not answered else UmlError
                raise error(f"the UML kernel {what} during {name}; it was ended. Last console lines:\n{self.tail()}")
            answer = self._workdir / f"answer-{serial}.pkl"
            status, payload, trace = pickle.loads(answer.read_bytes())
            answer.unlink()
        if status == "ok":
            return payload
        exc = payload if isinstance(payload, BaseException) else RemoteError(payload)
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised inside the UML kernel {self.release}:)\n{trace}")
        raise exc


def run_command(argv: list[str]) -> int:
    """Run ``argv`` in this kernel with its output on the console (called in the agent by
    ``tcplab uml run``); its exit status."""
    return subprocess.call(argv, stdin=subprocess.DEVNULL)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# --- one kernel per process ----------------------------------------------------------------------

_shared: UmlKernel | None = None
_shared_lock = threading.Lock()


def shared_kernel() -> UmlKernel:
    """The process's UML kernel, booted on first use and powered off at exit: a case's runs
    and a notebook's paths all go to one boot."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive:
            mem = os.environ.get("TCPLAB_UML_MEM", "1G")
            _shared = UmlKernel(mem=mem).start()
        return _shared


def shutdown_shared() -> None:
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.stop()
            _shared = None
