"""Theory: known answers from the formulas' sources, consistency between the formulas, and
the running kernel as the reference where it can be asked without changing the system
(socket buffer sizes; Nagle against delayed ACKs on loopback)."""

from __future__ import annotations

import math
import socket
import statistics
import threading
import time
from pathlib import Path

import pytest

from tcplab.analysis import theory
from tcplab.units import ParameterError


def test_bdp_and_window_limited_throughput_known_answers():
    assert theory.bdp(100e6, 0.020) == 250_000
    assert theory.window_limited_throughput(65536, 0.100) == pytest.approx(5.24288e6)
    # The link caps it once the window covers the bandwidth-delay product.
    assert theory.window_limited_throughput(10**6, 0.010, 100e6) == 100e6
    assert theory.window_limited_throughput(65536, 0.100, 100e6) == pytest.approx(5.24288e6)
    with pytest.raises(ParameterError, match="rtt"):
        theory.window_limited_throughput(65536, 0)
    with pytest.raises(ParameterError, match="rate"):
        theory.bdp(float("nan"), 0.02)


def test_socket_buffer_doubling_and_clamping():
    assert theory.effective_sndbuf(16 * 1024, 212992) == 32768
    assert theory.effective_sndbuf(10**7, 212992) == 425984  # clamped to wmem_max, then doubled
    assert theory.effective_sndbuf(10**7, 212992, force=True) == 2 * 10**7
    assert theory.effective_sndbuf(1, 212992) == theory.SOCK_MIN_SNDBUF == 4608
    assert theory.effective_rcvbuf(1, 212992) == theory.SOCK_MIN_RCVBUF == 2304
    assert theory.effective_rcvbuf(-1, 212992) == 425984  # a negative int is a huge u32
    with pytest.raises(ParameterError, match="sndbuf"):
        theory.effective_sndbuf(2**31, 212992)
    with pytest.raises(ParameterError, match="sndbuf"):
        theory.effective_sndbuf("16KB", 212992)


@pytest.mark.parametrize("option, predict, sysctl", [
    (socket.SO_SNDBUF, theory.effective_sndbuf, "wmem_max"),
    (socket.SO_RCVBUF, theory.effective_rcvbuf, "rmem_max"),
])
def test_socket_buffer_prediction_matches_the_running_kernel(option, predict, sysctl):
    limit = int(Path(f"/proc/sys/net/core/{sysctl}").read_text())
    for requested in (0, 1, 1000, 2303, 2305, 4096, 16 * 1024, 100_000, limit - 1, limit, limit + 1,
                      3 * limit, 2**31 - 1, -1):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, option, requested)
            assert sock.getsockopt(socket.SOL_SOCKET, option) == predict(requested, limit), requested


def test_window_from_space_old_rule_and_scaling_ratio():
    assert theory.window_from_space(65536) == 32768  # tcp_adv_win_scale=1: half
    assert theory.window_from_space(65536, 2) == 49152  # keep 3/4
    assert theory.window_from_space(65536, -2) == 16384  # keep 1/4
    assert theory.window_from_space_scaling_ratio(65536) == 32768  # default ratio 128/256
    assert theory.window_from_space_scaling_ratio(1 << 20, 170) == (170 << 20) >> 8
    assert theory.rwnd_limited_throughput(131072, 0.1) == pytest.approx(8 * 65536 / 0.1)
    with pytest.raises(ParameterError, match="scaling_ratio"):
        theory.window_from_space_scaling_ratio(65536, 0)
    with pytest.raises(ParameterError, match="adv_win_scale"):
        theory.window_from_space(65536, 32)


def test_scaling_ratio_from_clamp_inverts_the_window_rule():
    # Every ratio the kernel can hold comes back from the clamp it sets with it, for a buffer of
    # 16 KB (the doubled 8 KB of case 02) and for one whose windows round down.
    for rcvbuf in (16384, 65536, 6000):
        for ratio in range(1, 257):
            clamp = theory.window_from_space_scaling_ratio(rcvbuf, ratio)
            found = theory.scaling_ratio_from_clamp(clamp, rcvbuf)
            assert theory.window_from_space_scaling_ratio(rcvbuf, found) == clamp and found <= ratio
    assert theory.scaling_ratio_from_clamp(10368, 16384) == 162
    # A clamp no ratio gives for this buffer (autotuning or pressure set it): no answer.
    assert theory.scaling_ratio_from_clamp(10369, 16384) is None
    assert theory.scaling_ratio_from_clamp(20000, 16384) is None
    with pytest.raises(ParameterError, match="rcvbuf"):
        theory.scaling_ratio_from_clamp(100, 0)


def test_initial_window_and_goodput():
    assert theory.initial_window(1448) == 14480
    assert theory.mss_for_mtu(1500) == 1448 and theory.mss_for_mtu(1500, ts=False) == 1460
    assert theory.max_goodput(100e6) == pytest.approx(100e6 * 1448 / 1514)
    assert theory.max_goodput(100e6, ts=False) == pytest.approx(100e6 * 1460 / 1514)


def test_transfer_time_known_cases_and_limits():
    rtt, rate = 0.020, 100e6
    # One segment: handshake, then one round trip plus its serialisation.
    assert theory.transfer_time(1448, rate, rtt) == pytest.approx(2 * rtt + 1448 * 8 / rate)
    assert theory.transfer_time(0, rate, rtt) == rtt
    # The initial window (10 x 1448) goes in the first round: 14480 bytes, one data round.
    assert theory.transfer_time(14480, rate, rtt) == pytest.approx(2 * rtt + 14480 * 8 / rate)
    # One byte more takes a second round.
    assert theory.transfer_time(14481, rate, rtt) > 3 * rtt
    # A large transfer tends to the rate; a small window to window / RTT.
    size = 10**9
    assert size * 8 / theory.transfer_time(size, rate, rtt) == pytest.approx(rate, rel=0.01)
    windowed = theory.transfer_time(size // 10, rate, rtt, window=65536)
    assert (size // 10) * 8 / windowed == pytest.approx(theory.window_limited_throughput(65536, rtt), rel=0.01)
    sizes = [0, 1, 1448, 14480, 14481, 10**5, 10**6, 10**7]
    times = [theory.transfer_time(s, rate, rtt) for s in sizes]
    assert times == sorted(times)
    # Never faster than the link or than the window allow.
    for s in sizes[1:]:
        assert theory.transfer_time(s, rate, rtt) >= 2 * rtt + s * 8 / rate
        assert theory.transfer_time(s, rate, rtt, window=65536) >= theory.transfer_time(s, rate, rtt)
    with pytest.raises(ParameterError, match="window"):
        theory.transfer_time(1000, rate, rtt, window=0)


def test_mathis():
    expected = 8 * 1448 / 0.1 * math.sqrt(1.5) / math.sqrt(0.01)
    assert theory.mathis_throughput(1448, 0.1, 0.01) == pytest.approx(expected)  # ~1.42 Mbit/s
    assert theory.mathis_throughput(1448, 0.1, 0.0001) == pytest.approx(10 * expected)
    assert theory.mathis_throughput(1448, 0.1, 0) == math.inf
    with pytest.raises(ParameterError, match="loss"):
        theory.mathis_throughput(1448, 0.1, 1.5)


@pytest.mark.parametrize("writes, stalls, reason", [
    ([99_900], False, "no_small_outstanding"),  # 68 x 1448 + 1436: the lone small tail goes
    ([100_000], False, "no_small_outstanding"),  # 69 x 1448 + 88: same
    ([1448 * 4], False, "full_segments"),
    ([300], False, "no_small_outstanding"),
    ([200, 300], True, "held_until_delayed_ack"),  # header + body: body waits for the ACK
    ([99_900, 100], True, "held_until_delayed_ack"),  # a small write after a small tail
    ([100, 3000], False, "held_until_ack"),  # the receiver ACKs two segments at once
])
def test_nagle_minshall_patterns(writes, stalls, reason):
    verdict = theory.nagle_stall(writes, 1448, rtt_s=0.010)
    assert (verdict.stalls, verdict.reason) == (stalls, reason)
    if stalls:
        assert verdict.expected_delay_s == pytest.approx(theory.TCP_DELACK_MIN + 0.010)
        assert verdict.held_bytes > 0
    assert theory.nagle_stall(writes, 1448, nodelay=True) == theory.NagleVerdict(False, 0.0, "nodelay")
    # In quick-ack mode (connection start) the ACK is never delayed.
    assert not theory.nagle_stall(writes, 1448, receiver_quickack=True).stalls


def test_nagle_classic_rule_explains_the_99900_versus_100000_bytes_case():
    even = theory.nagle_stall([99_900], 1448, variant="rfc896")  # 68 full segments: all ACKed
    odd = theory.nagle_stall([100_000], 1448, variant="rfc896")  # 69: the last one's ACK is delayed
    assert (even.stalls, even.reason) == (False, "held_until_ack")
    assert (odd.stalls, odd.reason, odd.held_bytes) == (True, "held_until_delayed_ack", 88)
    with pytest.raises(ParameterError, match="writes"):
        theory.nagle_stall([], 1448)
    with pytest.raises(ParameterError, match="variant"):
        theory.nagle_stall([1], 1448, variant="bsd")


def _request_times(writes: list[int], requests: int) -> list[float]:
    """Seconds per request/response on loopback: the client writes ``writes``, the server
    answers one byte once it has the whole request."""
    size = sum(writes)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def serve():
            conn, _ = listener.accept()
            with conn:
                for _ in range(requests):
                    got = 0
                    while got < size:
                        got += len(conn.recv(size - got))
                    conn.sendall(b"r")

        server = threading.Thread(target=serve)
        server.start()
        times = []
        with socket.create_connection(listener.getsockname()) as client:
            for _ in range(requests):
                start = time.perf_counter()
                for w in writes:
                    client.sendall(b"q" * w)
                client.recv(1)
                times.append(time.perf_counter() - start)
        server.join(timeout=5)
    return times


def test_nagle_prediction_matches_the_kernel_on_loopback():
    mss = 65483  # loopback: MTU 65536 - 40 - 12 (timestamps)
    split = theory.nagle_stall([100, 100], mss)
    assert split.stalls
    # After the first exchanges the server is in ping-pong mode and delays its ACKs.
    stalled = statistics.median(_request_times([100, 100], 7)[2:])
    assert split.expected_delay_s * 0.75 <= stalled <= split.expected_delay_s + 0.030
    # A single write, and a small write after a full segment plus a small tail that the
    # receiver ACKs at once (more than one segment arrived): no stall.
    for writes in ([200], [70_000, 100]):
        assert not theory.nagle_stall(writes, mss).stalls
        assert statistics.median(_request_times(writes, 7)[2:]) < 0.010, writes
