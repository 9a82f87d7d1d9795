"""parse_ss on a literal sample with every field, and on real ss output of a live socket."""

from __future__ import annotations

import math
import socket
import sys
import time

import pandas as pd
import pytest

from tcplab.lab import NetPath
from tcplab.observe import health, sockdiag
from tcplab.observe.ss import COLUMNS, SsSampler, diag_row, parse_ss, ss_command

# ss -tinmH from iproute2 6.1 on kernel 6.18, edited so that every parsed field appears.
SAMPLE = """\
ESTAB 12 39096  10.201.2.2:5301 10.201.1.2:58978
\t skmem:(r1,rb131072,t2,tb117504,f2504,w50744,o3,bl4,d5) cubic wscale:7,10 rto:240 backoff:2 rtt:38.198/24.815 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:18 ssthresh:10 bytes_sent:15988 bytes_retrans:1448 bytes_acked:14540 bytes_received:77 segs_out:12 segs_in:10 data_segs_out:12 send 5458715bps lastsnd:116 lastrcv:304 lastack:52 pacing_rate 2.1Mbps delivery_rate 181128bps delivered:13 app_limited busy:304ms rwnd_limited:120ms(39.5%) sndbuf_limited:30ms(9.9%) unacked:7 retrans:1/3 lost:2 dsack_dups:1 rcv_space:14480 rcv_ssthresh:64088 rcv_wnd:65536 notsent:39096 minrtt:20.206 snd_wnd:1073152
"""


def test_literal_sample_every_field():
    (row,) = parse_ss(SAMPLE)
    assert set(row) == set(COLUMNS)
    expected = {
        "state": "ESTAB", "src": "10.201.2.2", "sport": 5301, "dst": "10.201.1.2", "dport": 58978,
        "recv_q": 12, "send_q": 39096, "cc": "cubic", "cwnd": 18, "ssthresh": 10, "rtt": 0.038198,
        "rttvar": 0.024815, "rto": 0.240, "mss": 1448, "snd_wnd": 1073152, "rcv_space": 14480,
        "rcv_ssthresh": 64088, "rcv_wnd": 65536, "skmem_r": 1, "skmem_rb": 131072, "skmem_t": 2,
        "skmem_tb": 117504, "skmem_f": 2504, "skmem_w": 50744, "skmem_o": 3, "skmem_bl": 4, "skmem_d": 5,
        "notsent": 39096, "unacked": 7, "retrans": 3, "lost": 2, "delivery_rate": 181128,
        "pacing_rate": 2.1e6, "app_limited": True, "bytes_acked": 14540, "bytes_received": 77,
        "busy_s": 0.304, "rwnd_limited_s": 0.120, "sndbuf_limited_s": 0.030,
        "wscale_snd": 7, "wscale_rcv": 10, "minrtt": 0.020206, "advmss": 1448, "rcvmss": 536, "pmtu": 1500,
        "send_rate": 5458715, "backoff": 2,
    }
    for key, value in expected.items():
        assert row[key] == (pytest.approx(value) if isinstance(value, float) else value), key


def test_ato_and_send_rate_units():
    (row,) = parse_ss("ESTAB 0 0 10.0.0.1:1 10.0.0.2:2 bbr wscale:10,10 rto:204 rtt:20.5/1 ato:40 mss:1448 "
                      "cwnd:50 send 28.3Mbps pacing_rate 30Mbps minrtt:20.1")
    assert row["ato"] == pytest.approx(0.040) and row["minrtt"] == pytest.approx(0.0201)
    assert row["send_rate"] == pytest.approx(28.3e6) and row["pacing_rate"] == pytest.approx(30e6)
    assert (row["wscale_snd"], row["wscale_rcv"]) == (10, 10) and row["cc"] == "bbr"


def test_one_line_form_parses_the_same():
    oneline = SAMPLE.replace("\n\t", " ")
    assert parse_ss(oneline) == parse_ss(SAMPLE)


def test_absent_fields_are_nan():
    (row,) = parse_ss("ESTAB 0 0 10.0.0.1:1 10.0.0.2:2 skmem:(r0,rb1,t0,tb2,f0,w0,o0,bl0,d0) reno cwnd:10")
    assert row["cc"] == "reno" and row["cwnd"] == 10 and row["app_limited"] is False
    for key in ("rtt", "snd_wnd", "rcv_wnd", "unacked", "lost", "delivery_rate", "rwnd_limited_s",
                "wscale_snd", "minrtt", "ato", "send_rate", "backoff"):
        assert math.isnan(row[key]), key


def _listen(port):
    srv = socket.socket()
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    return srv


def _connect(address, port):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((address, port))
    return sock


#: Columns ss prints rounded: rates as "%.1fMbps" (up to 5 % off), times with %g.
_ROUNDED = {"pacing_rate": 0.05, "delivery_rate": 0.05, "send_rate": 0.05}


def _assert_like_ss(ss_text, before, after):
    """Each column of ss's row lies between the inet_diag rows read just before and just
    after ss ran (a live socket moves in between), and is missing where both are; except
    rcv_wnd (Linux 6.2) where the ss program is older than the kernel and never prints it."""
    ss_rows = parse_ss(ss_text)
    assert len(ss_rows) == len(before) == len(after)
    key = lambda row: (row["sport"], row["dport"])
    for ss_row, one, two in zip(sorted(ss_rows, key=key), sorted(map(diag_row, before), key=key),
                                sorted(map(diag_row, after), key=key)):
        for column in COLUMNS:
            if column in ("time", "time_end", "side"):
                continue
            got, low, high = ss_row[column], one[column], two[column]
            if isinstance(got, (str, bool)) or got is None:
                assert got in (low, high), (column, got, low, high)
                continue
            known = [v for v in (low, high) if not math.isnan(v)]
            if math.isnan(got):
                assert len(known) < 2 or (column == "rcv_wnd" and "rcv_wnd:" not in ss_text), (column, low, high)
                continue
            assert known, (column, got)
            if len(known) < 2:
                # The field appeared between the two reads (ss prints backoff, retrans, … only
                # once they are above zero): its value then lies between 0 and the later read,
                # e.g. a persist timer's backoff going 0 -> 1 (ss) -> 2 on a busy host.
                known.append(0.0)
            slack = _ROUNDED.get(column, 1e-3)
            assert min(known) * (1 - slack) - 1e-6 <= got <= max(known) * (1 + slack) + 1e-6, (column, got, low, high)


def _wait_until_blocked(host, port, *, settled_s=0.1, timeout_s=10.0):
    """Wait until the receiver's queue and memory stop moving: the sender has filled the
    window. Before that, data still on the 2 ms path changes fields that go up and down
    (skmem forward allocation, recv_q), which no before/after bracket can hold."""
    def still(rows):
        return sorted((r["recv_q"], r["skmem_r"], r["skmem_f"]) for r in map(diag_row, rows))
    deadline = time.monotonic() + timeout_s
    last = still(host.call(sockdiag.tcp_sockets, port))
    while time.monotonic() < deadline:
        time.sleep(settled_s)
        now = still(host.call(sockdiag.tcp_sockets, port))
        if now == last and any(recv_q > 0 for recv_q, _, _ in now):
            return
        last = now
    raise AssertionError(f"the receiver's queue never settled within {timeout_s} s: {last}")


@pytest.mark.kernel
def test_real_ss_output_of_a_blocked_receiver(root):
    """A receiver that reads nothing: ss shows its queue holding the data, the sender stuck."""
    port = 5311
    with NetPath(rtt="2ms") as path:
        srv = path.server.call(_listen, port)
        cli = path.client.call(_connect, path.server.address, port)
        conn, _ = srv.accept()
        conn.setblocking(False)
        sent = 0
        try:
            while sent < 4 << 20:
                sent += conn.send(b"x" * 65536)
        except BlockingIOError:
            pass
        _wait_until_blocked(path.client, port)
        cc = path.client.sysctl("net.ipv4.tcp_congestion_control")
        texts, dumps = {}, {}
        for host in (path.client, path.server):
            before = host.call(sockdiag.tcp_sockets, port)
            texts[host.name] = host.run(ss_command(port)).stdout
            dumps[host.name] = (before, host.call(sockdiag.tcp_sockets, port))
        for sock in (cli, conn, srv):
            sock.close()
    for name, (before, after) in dumps.items():
        _assert_like_ss(texts[name], before, after)
    (client,) = parse_ss(texts["client"])
    # The 4 KB SO_RCVBUF set before connect() announces a smaller scale than the server's
    # (this also lets the comparison above tell tcp_info's two wscale nibbles apart).
    assert client["wscale_rcv"] < client["wscale_snd"]
    (server,) = parse_ss(texts["server"])
    assert client["state"] == server["state"] == "ESTAB"
    assert (client["dport"], server["sport"]) == (port, port)
    assert client["src"] == server["dst"] == path.client.address
    assert client["cc"] == server["cc"] == cc
    # The receive queue holds what arrived; its memory is close to the small buffer.
    assert client["recv_q"] > 0 and client["skmem_r"] >= client["recv_q"]
    assert client["skmem_r"] <= client["skmem_rb"] * 1.5
    assert 0 < server["send_q"] <= sent and client["recv_q"] <= sent
    assert server["rtt"] > 0.0015 and server["mss"] == 1448
    assert server["notsent"] > 0


@pytest.mark.kernel
def test_sampler_series_in_both_namespaces(root):
    from .helpers import transfer

    port = 5312
    with NetPath(rtt="10ms", rate="20mbit") as path:
        with SsSampler({"client": path.client.ns, "server": path.server.ns}, port, interval=0.01) as sampler:
            assert transfer(path, port, 1 << 20) == 1 << 20
        df = sampler.frame()
    assert sampler.errors == {}
    assert list(df.columns) == COLUMNS
    assert set(df.side) == {"client", "server"}
    assert df.time.is_monotonic_increasing
    # Each sample carries when ss was started and when it returned: a positive span, well under
    # the interval's multiple that a stalled sampler would show.
    span = df.time_end - df.time
    assert (span > 0).all() and span.max() < 1.0
    server = df[(df.side == "server") & (df.state == "ESTAB")]
    # ~0.5 s of transfer at 10 ms: tens of samples, and bytes_acked only grows.
    assert len(server) >= 10
    assert server.bytes_acked.dropna().is_monotonic_increasing
    assert server.bytes_acked.max() <= (1 << 20) + 1


@pytest.mark.kernel
def test_a_sampler_held_from_its_schedule_says_for_how_much_of_the_run(root):
    """The sampler's lateness (health's reading of a lab kernel that runs its programs late):
    small while its thread gets the CPU on time; most of the run when the thread is held. Held
    here for 1.2 s of ~1.8: the test's main thread keeps the GIL, as a saturated UML kernel
    keeps its one CPU."""
    with NetPath() as path:
        with SsSampler({"client": path.client.ns}, 5313, interval=0.01) as quiet:
            time.sleep(0.5)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(5.0)  # the main thread gives up the GIL only after 5 s, or when it waits
        try:
            with SsSampler({"client": path.client.ns}, 5313, interval=0.01) as held:
                time.sleep(0.4)
                until = time.monotonic() + 1.2
                while time.monotonic() < until:
                    pass
                time.sleep(0.2)
        finally:
            sys.setswitchinterval(switch)
    assert quiet.errors == {} and held.errors == {}
    assert quiet.late_share() < health.PROGRAMS_LATE_LIMIT / 2, quiet.late_share()
    assert held.late_share() > health.PROGRAMS_LATE_LIMIT, held.late_share()
    assert health.verdict({"programs_late_share": held.late_share()})[0].startswith(
        "the lab kernel ran its programs late for")
    assert health.verdict({"programs_late_share": quiet.late_share()}) == []


def test_socket_rows_picks_one_sides_connected_socket_in_time_order():
    from tcplab.observe.ss import socket_rows

    tel = pd.DataFrame({"side": ["server", "client", "server", "server"], "state": ["ESTAB", "ESTAB", "LISTEN", "ESTAB"],
                        "time": [2.0, 1.0, 0.5, 1.5], "cwnd": [20, 10, 0, 15]})
    rows = socket_rows(tel, "server")
    assert rows["cwnd"].tolist() == [15, 20]
    # A table recorded before samples carried their end time says so: unknown, not a guess.
    assert rows["time_end"].isna().all()
    assert socket_rows(tel, "server", ("ESTAB", "LISTEN"))["time"].tolist() == [0.5, 1.5, 2.0]
    assert socket_rows(pd.DataFrame(), "server").empty
