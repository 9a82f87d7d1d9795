"""The agent inside a lab kernel of its own: does the calls the host sends (see :mod:`tcplab.lab.agent_kernel`).

Two kinds start it: the init script of a User-mode Linux kernel (:mod:`tcplab.lab.uml`), and
that of a user namespace of the host's kernel (:mod:`tcplab.lab.userns`), as
``python -m tcplab.lab.agent WORKDIR``. It reads ``call N`` / ``quit`` lines from its
console (stdin), runs ``WORKDIR/call-N.pkl`` and writes ``WORKDIR/answer-N.pkl``, then says
``done N``. The lab's live objects stay here, kept by id by the modules that own them: a
path opened for the host in :mod:`tcplab.lab.path` (``open_for_host``), any other object in
:mod:`tcplab.lab.kernels` (``hold``).
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

#: The prefix of the agent's lines on its console; everything else there is kernel or program output.
PROTOCOL = "tcplab-agent:"


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
    """Close every path still open; a UML kernel then powers itself off, while a user
    namespace ends when this process (its first) does."""
    from .kernels import agent_kind
    from .path import close_all_for_host

    close_all_for_host()
    sys.stdout.flush()
    if agent_kind() != "uml":
        return
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
