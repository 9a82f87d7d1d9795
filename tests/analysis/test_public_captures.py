"""Other people's traffic: the public captures beside the project (``../shared/captures``,
or ``$TCPLAB_PUBLIC_CAPTURES``; its ``SOURCES.tsv`` names each file's origin and, where it
is evident, what the capture shows). They are read from there, never copied into the
repository.

For every capture: the engine's flows and per-packet columns equal tshark's, its
duplicate frames equal tcptrace's "hardware duplicates" (and without them the rest equals
tshark on the file without the copies), and ``tcplab diagnose --all`` and ``-o`` finish
without a traceback. Where SOURCES.tsv says what a capture shows, the verdict agrees.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tcplab.analysis import _tshark, diagnose, read_packets

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = Path(os.environ.get("TCPLAB_PUBLIC_CAPTURES", ROOT.parent / "shared" / "captures"))
TCPLAB = str(ROOT / ".venv" / "bin" / "tcplab")


def _sources() -> list[dict]:
    path = CAPTURES / "SOURCES.tsv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


SOURCES = _sources()
FILES = [row["file"] for row in SOURCES]

#: What SOURCES.tsv says the capture shows, as the label of its largest flow (or what the
#: label must not be). In our words; the column itself is prose.
EXPECTED_LABEL = {
    "tt_zwnd.pcap": "zero-window",
    "tt_dsack.pcap": "congestion-loss",
    "tt_dlt_null.pcap": "receiver-window-limited",
    "cs_tcp_zerowindowdead.pcapng": "zero-window",
    "cs_tcp_retransmissions.pcapng": "peer-unresponsive",
}
#: One-way bulk whose receiver answers with 4-byte application acknowledgements: no
#: request/response turns.
NOT_LABEL = {"zk_irc_dcc_send.pcapng": "application-limited"}

pytestmark = pytest.mark.skipif(
    not SOURCES, reason=f"no public captures at {CAPTURES} (set TCPLAB_PUBLIC_CAPTURES)")


@pytest.fixture(scope="module")
def tables():
    return {}


def table_of(tables, name):
    if name not in tables:
        tables[name] = read_packets(CAPTURES / name)
    return tables[name]


def hardware_dups(path: Path) -> int:
    """tcptrace's count of hardware duplicates, both directions of every connection."""
    out = subprocess.run(["tcptrace", "-l", "-n", str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return sum(int(a) + int(b) for a, b in re.findall(r"hardware dups:\s+(\d+) segs\s+hardware dups:\s+(\d+) segs",
                                                      out.stdout))


def test_the_sources_file_lists_every_capture():
    on_disk = sorted(p.name for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    assert sorted(FILES) == on_disk


@pytest.mark.parametrize("name", FILES)
def test_flows_and_columns_equal_tsharks(name, tables, tshark, tmp_path):
    table = table_of(tables, name)
    p = table.packets
    theirs = _tshark.run(str(CAPTURES / name), tshark)
    assert len(table.flows) == theirs["flow"].nunique()
    copies = p["duplicate_frame"].to_numpy()
    if not copies.any():
        result = _tshark.compare(p, theirs)
        assert result.rows == len(p) and result.ok, result.summary()
        return
    # Copies of frames: tshark calls them retransmissions; the reference for everything
    # else is tshark on the file without them (editcap deletes them by frame number).
    clean = tmp_path / "clean.pcap"
    dropped = p.loc[copies, "frame"].astype(str).tolist()
    subprocess.run(["editcap", "-F", "pcap", str(CAPTURES / name), str(clean), *dropped], check=True,
                   capture_output=True, timeout=120)
    ours = _tshark.without_frames(p, p.loc[copies, "frame"].to_numpy())
    result = _tshark.compare(ours, _tshark.run(str(clean), tshark))
    assert result.rows == len(ours) and result.ok, result.summary()


@pytest.mark.skipif(shutil.which("tcptrace") is None, reason="tcptrace is installed by make setup")
@pytest.mark.parametrize("name", FILES)
def test_duplicate_frames_equal_tcptraces_hardware_duplicates(name, tables):
    assert int(table_of(tables, name).packets["duplicate_frame"].sum()) == hardware_dups(CAPTURES / name)


@pytest.mark.parametrize("name", FILES)
def test_every_flow_is_diagnosed_without_a_traceback(name, tmp_path):
    every = subprocess.run([TCPLAB, "diagnose", str(CAPTURES / name), "--all"], capture_output=True, text=True,
                           timeout=600)
    assert every.returncode in (0, 1), every.stderr
    assert "Traceback" not in every.stderr and re.search(r"^\d+ flows?: ", every.stdout, re.M)
    report = tmp_path / "report.html"
    one = subprocess.run([TCPLAB, "diagnose", str(CAPTURES / name), "-o", str(report)], capture_output=True,
                         text=True, timeout=600)
    assert one.returncode in (0, 1), one.stderr
    assert "Traceback" not in one.stderr and report.stat().st_size > 10_000


@pytest.mark.parametrize("name", sorted(set(EXPECTED_LABEL) | set(NOT_LABEL)))
def test_the_verdict_agrees_with_what_the_capture_shows(name, tables):
    d = diagnose(table_of(tables, name))
    if name in EXPECTED_LABEL:
        assert d.label == EXPECTED_LABEL[name], d.summary
    else:
        assert d.label != NOT_LABEL[name], d.summary


def test_copies_of_frames_are_no_retransmissions_and_give_no_negative_round_trip(tables):
    """Every data frame captured twice, at two points whose clocks disagree (SOURCES.tsv)."""
    d = diagnose(table_of(tables, "tt_hardware_dups.pcap"))
    m = d.metrics
    assert m.duplicate_frames == 486 and m.retransmissions == 0 and m.resent_segments == 0
    assert (m.rtt["rtt"] > 0).all() and m.rtt_min_s > 0
    assert m.time_reversals > 0
    assert any("twice" in c for c in d.caveats) and any("timestamped before" in c for c in d.caveats)
