"""Window scaling helpers: the scale Linux picks, and the handshake read from a capture."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from tcplab.rooms import windows


def test_initial_wscale_follows_the_largest_buffer_limit():
    assert windows.initial_wscale(32 * 1024**2, 4 * 1024**2) == 10  # 6.x default tcp_rmem[2]
    assert windows.initial_wscale(6 * 1024**2, 212992) == 7  # the seeds' 6 MB
    assert windows.initial_wscale(4096, 4 * 1024**2) == 7  # rmem_max counts too
    assert windows.initial_wscale(65535, 0) == 0
    assert windows.initial_wscale(2**40, 0) == windows.TCP_MAX_WSCALE
    with pytest.raises(ValueError):
        windows.initial_wscale(0, 0)


def _trial(client, server, scaling, client_sysctl="1"):
    flows = pd.DataFrame({"flow": [0], "wscale_client": [client], "wscale_server": [server],
                          "window_scaling": [scaling]})
    # A 6.1 namespace shows no net.core.rmem_max: the limit comes from the caller.
    limits = {"net.ipv4.tcp_rmem": "4096 131072 33554432"}
    sysctls = {"client": {**limits, "net.ipv4.tcp_window_scaling": client_sysctl},
               "server": {**limits, "net.ipv4.tcp_window_scaling": "1"}}
    return SimpleNamespace(label="x", packets=SimpleNamespace(flows=flows), metrics=SimpleNamespace(flow=0),
                           run=SimpleNamespace(sysctls=sysctls))


def test_handshake_reports_offers_predictions_and_the_outcome():
    on = windows.handshake(_trial(10, 10, "on"), rmem_max=212992)
    assert on["client offered wscale"] == 10 and on["client predicted wscale"] == 10
    assert on["window scaling"] == "on"
    off = windows.handshake(_trial(-1, -1, "off", client_sysctl="0"), rmem_max=212992)
    assert off["client offered wscale"] is None and off["client predicted wscale"] is None
    # The server answers a SYN without the option without one: no shift to predict.
    assert off["server offered wscale"] is None and off["server predicted wscale"] is None
    assert off["window scaling"] == "off"
    table = windows.handshakes([_trial(10, 10, "on")], rmem_max=212992)
    assert table.loc["x", "server predicted wscale"] == 10
    # rmem_max counts when it is the larger limit
    small = _trial(10, 10, "on")
    small.run.sysctls["client"]["net.ipv4.tcp_rmem"] = "4096 131072 262144"
    assert windows.handshake(small, rmem_max=212992)["client predicted wscale"] == 3
    assert windows.handshake(small, rmem_max=4194304)["client predicted wscale"] == 7
