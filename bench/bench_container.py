"""What the single-user container image costs: its size, its start, and case 00 live in it.

    .venv/bin/python bench/bench_container.py [--image localhost/tcplab:latest] [--starts 3]
        [--podman "podman --runtime runc"] [--run-args "--ulimit nofile=20000:20000"]

Built first with container/make-base.sh and ``podman build -f container/Containerfile``
(docs/deploying.md). Every container runs as the image's learner (uid 1000) with no
capability (``--cap-drop=ALL``), the runtime's default seccomp profile, as a Kubernetes pod
runs it. Start: from ``podman run`` to ``tcplab doctor``'s answer (the container made,
started, its command run and removed), and to ``jupyterhub-singleuser`` answering over HTTP
(its ``api`` page; it is given the environment a hub gives it, and no hub answers it, as
none is needed to serve). Case 00: ``tcplab report --cases 00 --mode live --kernel auto``
inside the container, its wall time from ``podman run`` and its ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import run_alone, save, table

NO_CAPS = ["--cap-drop=ALL"]
#: What a hub hands a single-user server (jupyterhub.spawner.Spawner.get_env); the API URL is
#: the stand-in below.
HUB_ENV = {
    "JUPYTERHUB_USER": "learner", "JUPYTERHUB_SERVICE_PREFIX": "/user/learner/",
    "JUPYTERHUB_BASE_URL": "/", "JUPYTERHUB_API_TOKEN": "not-a-hub",
    "JUPYTERHUB_CLIENT_ID": "jupyterhub-user-learner",
}


class StandInHub(BaseHTTPRequestHandler):
    """What a single-user server asks its hub while it starts (its version, at /hub/api, and
    it exits when no hub answers) and then now and then (activity): answered, nothing more."""

    version = "0"  # the image's JupyterHub's, set before it serves

    def _answer(self) -> None:
        self.send_response(200)
        self.send_header("X-JupyterHub-Version", self.version)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"version": self.version}).encode())

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass



def image_size(podman: list[str], image: str) -> int:
    out = subprocess.run(podman + ["image", "inspect", image, "--format", "{{.Size}}"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def doctor_start(podman: list[str], run_args: list[str], image: str) -> tuple[float, int, str]:
    """Seconds to ``tcplab doctor``'s whole answer: the container's start, the lab kernel's (UML
    boots in it) and the doctor's own fidelity measurements; its exit code (1 when a fidelity
    measurement is off its goal) and the road it chose."""
    start = time.perf_counter()
    done = subprocess.run(podman + ["run", "--rm", *NO_CAPS, "--network=none", *run_args, image, "tcplab", "doctor"],
                          capture_output=True, text=True)
    road = next((line for line in done.stdout.splitlines() if line.startswith("the lab runs on")), "")
    return time.perf_counter() - start, done.returncode, road


def server_start(podman: list[str], run_args: list[str], image: str, port: int, hub: str, limit_s: float = 180) -> float:
    """Seconds from ``podman run`` to the server answering; in the host's network, where the
    stand-in hub listens on 127.0.0.1 (the network is not what is measured)."""
    env = [f"--env={k}={v}" for k, v in {**HUB_ENV, "JUPYTERHUB_API_URL": hub,
                                          "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}/user/learner/"}.items()]
    name = f"tcplab-bench-server-{port}"
    start = time.perf_counter()
    subprocess.run(podman + ["run", "-d", "--rm", "--name", name, *NO_CAPS, "--network=host", *run_args, *env,
                             image, "jupyterhub-singleuser", "--ip=127.0.0.1", f"--port={port}"],
                   capture_output=True, check=True)
    try:
        while time.perf_counter() - start < limit_s:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/user/learner/api", timeout=2) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - start
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"jupyterhub-singleuser did not answer within {limit_s} s")
    finally:
        subprocess.run(podman + ["stop", "-t", "5", name], capture_output=True)


def case00(podman: list[str], run_args: list[str], image: str) -> dict:
    script = ("tcplab report --cases 00 --mode live --kernel auto --formats html --reports-dir /tmp/r >&2"
              " ; cat /tmp/r/summary.json")
    start = time.perf_counter()
    done = subprocess.run(podman + ["run", "--rm", *NO_CAPS, "--network=none", "--shm-size=64m", *run_args,
                                    image, "sh", "-c", script], capture_output=True, text=True)
    wall = time.perf_counter() - start
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        print(done.stderr[-3000:], file=sys.stderr)
        return {"wall_s": wall, "status": "no summary", "checks": 0, "checks_failed": None}
    entry = summary["cases"][0]
    checks = entry.get("checks", [])
    return {"wall_s": wall, "status": entry["status"], "kernel": summary.get("kernel"),
            "backend": summary.get("backend"), "execution_s": entry.get("execution_s"),
            "checks": len(checks), "checks_failed": sum(1 for c in checks if c.get("passed") is False),
            "failed": [c for c in checks if c.get("passed") is False]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="localhost/tcplab:latest")
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--podman", default="podman", help="the podman command, e.g. 'podman --runtime runc'")
    parser.add_argument("--run-args", default="", help="more options for every podman run")
    parser.add_argument("--port", type=int, default=18888)
    args = parser.parse_args()
    podman, run_args = shlex.split(args.podman), shlex.split(args.run_args)
    size = image_size(podman, args.image)
    doctors = [doctor_start(podman, run_args, args.image) for _ in range(args.starts)]
    doctor = [seconds for seconds, _, _ in doctors]
    StandInHub.version = subprocess.run(podman + ["run", "--rm", *NO_CAPS, "--network=none", *run_args, args.image, "python", "-c",
                                       "import jupyterhub; print(jupyterhub.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    hub = ThreadingHTTPServer(("127.0.0.1", 0), StandInHub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    hub_url = f"http://127.0.0.1:{hub.server_address[1]}/hub/api"
    try:
        server = [server_start(podman, run_args, args.image, args.port, hub_url) for _ in range(args.starts)]
    finally:
        hub.shutdown()
    live = case00(podman, run_args, args.image)
    row = {"image": args.image, "size_bytes": size, "podman": args.podman, "run_args": args.run_args,
           "doctor_start_s": doctor, "doctor_exit": [code for _, code, _ in doctors], "doctor_road": doctors[0][2],
           "server_start_s": server,
           "doctor_start_median_s": statistics.median(doctor), "server_start_median_s": statistics.median(server),
           "case00": live}
    print(table([{**row, "size_mb": size / 1e6, "case00_s": live["wall_s"], "case00": live["status"]}],
                [("size_mb", "image MB", ".0f"), ("doctor_start_median_s", "to doctor s", ".1f"),
                 ("server_start_median_s", "to server s", ".1f"), ("case00_s", "case 00 live s", ".0f"),
                 ("case00", "case 00", "s")]))
    print(f"wrote {save('container', [row])}")
    return 0 if live["checks_failed"] == 0 and live["status"] in ("passed", "busy") else 1


if __name__ == "__main__":
    run_alone(main)
