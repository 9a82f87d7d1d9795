"""Fixtures for the pcap engine and expert analysis tests."""

from __future__ import annotations

import shutil

import pytest

from tcplab.analysis import _tshark, read_packets


@pytest.fixture(scope="session")
def tshark():
    """tshark is the reference; installed by `make setup`, so skip only if truly absent."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    return "tshark"


@pytest.fixture
def matches_tshark(tshark):
    """Assert that every column of every TCP row equals tshark's; returns our table."""

    def check(path, table=None):
        table = table if table is not None else read_packets(path)
        result = _tshark.compare(table.packets, _tshark.run(str(path), tshark))
        assert result.rows == len(table.packets)
        assert result.ok, result.summary()
        return table

    return check
