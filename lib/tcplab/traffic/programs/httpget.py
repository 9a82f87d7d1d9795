"""The client of the http workload: real ``curl`` downloading the file, timed from outside.

curl reports durations (``--write-out '%{json}'``), not instants, so the instant it exits is
the last byte read and the others are placed back from it. Configuration: ``url``,
``limit_rate`` (bytes per second, curl's ``--limit-rate``, or null).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from . import harness
from .sockets import SOCKET_KEYS

#: The parts of curl's report kept in the run record.
CURL_FIELDS = ("http_code", "size_download", "speed_download", "time_connect", "time_pretransfer",
               "time_starttransfer", "time_total", "num_connects", "errormsg", "exitcode",
               "curl_version")  # libcurl's version decides how --limit-rate reads (cases.pacing.CURL_BOUNDED_LOOP)


def run(config: dict[str, Any], report: harness.SideReport) -> None:
    argv = ["curl", "--silent", "--show-error", "--output", "/dev/null", "--write-out", "%{json}"]
    if config["limit_rate"] is not None:
        argv += ["--limit-rate", str(int(config["limit_rate"]))]
    argv.append(config["url"])
    print("$", " ".join(argv), file=sys.stderr, flush=True)
    finished = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
    ended = time.time()
    info = json.loads(finished.stdout) if finished.stdout.strip() else {}
    report.extra["curl"] = {key: info.get(key) for key in CURL_FIELDS}
    if finished.returncode != 0 or info.get("http_code") != 200:
        raise RuntimeError(f"curl exited {finished.returncode}, HTTP {info.get('http_code')}: {info.get('errormsg')}")
    began = ended - info["time_total"]
    report.received = info["size_download"]
    report.first_read = began + info["time_starttransfer"]
    report.last_read = ended
    # curl does not say what its socket was set to: only the ports are known.
    report.socket = dict.fromkeys(SOCKET_KEYS) | {"local_port": info.get("local_port"),
                                                  "peer_port": info.get("remote_port")}
    report.requests.append({"start": began, "end": ended, "latency": info["time_starttransfer"],
                            "bytes": info["size_download"]})


if __name__ == "__main__":
    harness.main(run)
