"""The agent inside a User-mode Linux lab kernel: does the calls the host sends (see :mod:`tcplab.lab.uml`).

Started by the kernel's init script as ``python -m tcplab.lab.uml_agent WORKDIR``; reads
``call N`` / ``quit`` lines from the console, runs ``WORKDIR/call-N.pkl`` and writes
``WORKDIR/answer-N.pkl``, then says ``done N``. The lab's live objects stay here: a
:class:`~tcplab.lab.path.NetPath` opened for the host is kept by id, and the host's stand-ins
for it and its hosts arrive as references resolved by :func:`live_path` and :func:`live_host`;
any other object the host keeps here (:func:`hold`) likewise by :func:`held`.
"""

from __future__ import annotations

import json
import os
import pickle
import platform
import sys
import traceback
from pathlib import Path
from typing import Any

PROTOCOL = "tcplab-uml:"
#: Paths opened for the host, by id.
LIVE: dict[str, Any] = {}


def inside() -> bool:
    """Whether this process is the agent of a UML lab kernel (then "uml" means this kernel)."""
    return os.environ.get("TCPLAB_UML_AGENT") == "1"


# --- the lab's live objects, by reference ---------------------------------------------------------

def open_path(spec: Any) -> dict[str, Any]:
    """Build a path in this kernel and keep it; what the host's stand-in needs to know."""
    from .path import NetPath

    spec.validate()  # against this kernel: its congestion controls, its modules
    path = NetPath(spec).start()
    LIVE[path.id] = path
    return {"id": path.id, "backend": path.backend,
            "hosts": {h.name: {"ns": h.ns, "address": h.address, "ifname": h.ifname}
                      for h in (path.client, path.router, path.server)}}


def close_path(path_id: str) -> dict[str, Any]:
    path = LIVE.pop(path_id, None)
    if path is None:
        return {}
    path.stop()
    return path.link_stats


def live_path(path_id: str) -> Any:
    try:
        return LIVE[path_id]
    except KeyError:
        raise LookupError(f"no live path {path_id} in this UML kernel (it was closed, or the kernel rebooted)") from None


def live_host(path_id: str, name: str) -> Any:
    return getattr(live_path(path_id), name)


#: Other objects the host keeps in this kernel for a while (a ballast of TCP memory), by id:
#: the context manager and what its ``__enter__`` gave.
HELD: dict[str, tuple[Any, Any]] = {}


def hold(factory: Any, args: tuple) -> str:
    """Enter ``factory(*args)`` (a context manager) here and keep it; its id."""
    manager = factory(*args)
    entered = manager.__enter__()
    ident = f"held-{id(manager):x}"
    HELD[ident] = (manager, entered)
    return ident


def held(ident: str) -> Any:
    try:
        return HELD[ident][1]
    except KeyError:
        raise LookupError(f"nothing held as {ident} in this UML kernel (it was let go, or the kernel rebooted)") from None


def let_go(ident: str) -> None:
    manager, _ = HELD.pop(ident, (None, None))
    if manager is not None:
        manager.__exit__(None, None, None)


# --- the loop ---------------------------------------------------------------------------------------

def _say(text: str) -> None:
    sys.stdout.write(f"{PROTOCOL} {text}\n")
    sys.stdout.flush()


def _answer(workdir: Path, serial: int) -> None:
    request = workdir / f"call-{serial}.pkl"
    try:
        fn, args, kwargs = pickle.loads(request.read_bytes())
        result: tuple = ("ok", fn(*args, **kwargs), "")
        data = pickle.dumps(result)
    except BaseException as exc:  # everything goes back to the host, where it is raised
        trace = traceback.format_exc()
        try:
            payload: Any = exc
            data = pickle.dumps(("error", payload, trace))
            pickle.loads(data)  # an exception that cannot be rebuilt there travels as its text
        except Exception:
            data = pickle.dumps(("error", f"{type(exc).__name__}: {exc}", trace))
    finally:
        request.unlink(missing_ok=True)
    tmp = workdir / f"answer-{serial}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, workdir / f"answer-{serial}.pkl")


def _modules(name: str) -> list[str]:
    try:
        return Path(f"/run/tcplab-modules/{name}").read_text().split()
    except OSError:
        return []


def _power_off() -> None:
    for path in list(LIVE):
        try:
            close_path(path)
        except Exception:
            traceback.print_exc()
    sys.stdout.flush()
    os.sync()
    with open("/proc/sysrq-trigger", "w") as fh:
        fh.write("o")


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    config = json.loads((workdir / "config.json").read_text())
    os.chdir(config["cwd"])
    os.environ.clear()
    os.environ.update(config["env"])
    import cloudpickle  # noqa: F401  (the host's calls are cloudpickled)

    _say("ready " + json.dumps({"release": platform.release(), "pid": os.getpid(),
                                "modules_loaded": _modules("loaded"), "modules_failed": _modules("failed")}))
    try:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["call"] and len(words) == 2:
                _answer(workdir, int(words[1]))
                _say(f"done {words[1]}")
            elif words[:1] == ["quit"]:
                break
    finally:
        _power_off()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
