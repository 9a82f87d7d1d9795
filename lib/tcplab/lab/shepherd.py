"""Watchdog of one lab kernel process (UML, or a user namespace): kills its whole process
group when the owner dies.

Run as ``python -S shepherd.py LIFELINE_FD PGID_FILE RT_PRIORITY -- COMMAND ARGS…`` by
:mod:`tcplab.lab.agent_kernel`. A UML kernel is several host processes (the kernel, its
helpers and one per address space inside); a SIGKILL of the main one orphans the rest, and
the kernel's parent-death signal reaches only the main one. A user namespace's lab is
``unshare`` and the agent below it. So this small process starts the command in a process
group of its own, writes that group's id where ``tcplab cleanup`` finds it, and watches a
pipe whose other end only the owner holds: when the pipe reports end of file (the owner
exited, however it died) or the command exits by itself, the whole group is killed. Where
the user may (root), the command runs round-robin real-time at RT_PRIORITY (0: not), and
every process it makes inherits it. Standard library only, started with ``-S``: it must be
up in milliseconds.
"""

import os
import select
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    lifeline, pgid_file, rt_priority = int(argv[0]), argv[1], int(argv[2])
    command = argv[argv.index("--") + 1:]

    def prioritize() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(rt_priority))
        except OSError:
            pass  # not allowed (not root): UML runs at the owner's priority

    # The console pipes (stdin, stdout) go to the command; the shepherd itself never reads them.
    kernel = subprocess.Popen(command, start_new_session=True, preexec_fn=prioritize if rt_priority else None)
    tmp = pgid_file + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(str(kernel.pid))
    os.replace(tmp, pgid_file)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)  # a Ctrl-C of the owner's group is the owner's to handle
    while kernel.poll() is None:
        ready, _, _ = select.select([lifeline], [], [], 0.5)
        if ready and not os.read(lifeline, 64):
            break  # the owner is gone
    try:
        os.killpg(kernel.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    kernel.wait()
    try:
        os.unlink(pgid_file)
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
