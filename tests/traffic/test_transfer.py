"""The side programs' own accounting, without a network: time spent blocked in send()."""

from __future__ import annotations

import socket
import threading
import time

from tcplab.traffic.programs.harness import SideReport
from tcplab.traffic.programs.transfer import send


def test_send_reports_the_time_it_waited_for_room_in_the_send_buffer():
    writer, reader = socket.socketpair()
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    report = SideReport()

    def drain_later():
        time.sleep(0.3)
        while reader.recv(65536):
            pass

    thread = threading.Thread(target=drain_later)
    thread.start()
    began = time.time()
    send(writer, 2 * 1024**2, 65536, report)
    spent = time.time() - began
    writer.close()
    thread.join()
    reader.close()
    assert report.sent == 2 * 1024**2
    assert 0.25 <= report.send_wait_s <= spent + 0.01
    assert report.first_write <= report.last_write


def test_send_into_an_empty_buffer_barely_waits():
    writer, reader = socket.socketpair()
    report = SideReport()
    send(writer, 1024, 1024, report)
    assert report.send_wait_s < 0.05 and report.last_write is not None
    writer.close()
    reader.close()


def test_a_side_program_starts_with_the_standard_library_and_its_own_package_only():
    """Each run starts two side programs, in the lab's kernel: in a UML kernel an import of the
    lab's modules (pyroute2, the workloads) cost 1.2 s a start, so none may come with them."""
    import json
    import pkgutil
    import subprocess
    import sys

    from tcplab.traffic import programs

    names = sorted(module.name for module in pkgutil.iter_modules(programs.__path__))
    loaded = subprocess.run(
        [sys.executable, "-c", "import importlib, json, sys\n"
         "before = set(sys.modules)  # the interpreter's own start (site, its customizations)\n"
         f"for name in {names!r}: importlib.import_module('tcplab.traffic.programs.' + name)\n"
         "print(json.dumps(sorted(set(sys.modules) - before)))"],
        capture_output=True, text=True, check=True)
    modules = json.loads(loaded.stdout)
    assert "tcplab.traffic.programs.stream" in modules  # the programs themselves were imported
    foreign = [m for m in modules if m.split(".")[0] not in sys.stdlib_module_names
               and m not in ("tcplab", "tcplab.traffic") and not m.startswith("tcplab.traffic.programs")]
    assert foreign == []
