"""An HTTP server (http.server) that serves one GET of a generated file of ``size`` bytes.

Configuration: ``address``, ``port``, ``size``, ``write_size``, ``socket`` (:class:`SocketOptions`).
"""

from __future__ import annotations

import http.server
from typing import Any

from . import harness, sockets
from .transfer import send


def run(config: dict[str, Any], report: harness.SideReport) -> None:
    options = sockets.SocketOptions(**config["socket"])

    class FileHandler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            options.apply(self.request)
            report.socket = options.describe(self.request)
            super().setup()

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(config["size"]))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            send(self.connection, config["size"], config["write_size"], report)

    class OneShotServer(http.server.HTTPServer):
        def server_bind(self) -> None:
            options.apply(self.socket)  # before listen: accepted sockets inherit the buffers
            super().server_bind()

        def handle_error(self, request: Any, client_address: Any) -> None:
            super().handle_error(request, client_address)  # prints the traceback to the log
            report.ok, report.error = False, f"serving {client_address[0]} failed (traceback in the log)"

    with OneShotServer((config["address"], config["port"]), FileHandler) as server:
        server.handle_request()


if __name__ == "__main__":
    harness.main(run)
