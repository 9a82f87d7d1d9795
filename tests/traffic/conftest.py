"""One shaped path per test module: building it costs more than most workloads here."""

from __future__ import annotations

import os

import pytest

from tcplab.lab import NetPath

#: The path of the seeds: 20 ms RTT, 100 Mbit/s, bbr.
RTT = 0.020


@pytest.fixture(scope="module")
def path():
    if os.geteuid() != 0:
        pytest.fail("kernel tests need root: run `make test` as root")
    with NetPath(rtt="20ms", rate="100mbit", cc="bbr") as built:
        yield built
