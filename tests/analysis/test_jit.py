"""The kernels run as plain Python for a tiny capture (:mod:`tcplab.analysis._jit`): the same
tables and verdicts as compiled, and a ``tcplab diagnose`` of a tiny file that loads neither
numba nor the lab (pyroute2), which is what keeps its start under 0.5 s (issue 16)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tcplab.analysis import _jit, read_packets
from tcplab.analysis.diagnose import diagnose_flows
from tcplab.analysis.table import data_flows

from .pcapgen import ethernet, random_capture, write_pcap

CAPTURES = Path(__file__).resolve().parents[2].parent / "shared" / "captures"
SMALL_PUBLIC = sorted(p for p in CAPTURES.glob("*.pcap*") if p.stat().st_size <= 48 * 1024) if CAPTURES.is_dir() else []

#: Run in a fresh interpreter: the kernels as Python whatever the size, then the packet
#: table (pickle) and every data flow's diagnosis (JSON) written beside the capture.
INTERPRETED = """
import json, sys
from tcplab.analysis import _jit
_jit.INTERPRET_MAX_BYTES = 1 << 40
assert _jit.interpret_if_small([sys.argv[1]])
from tcplab.analysis import read_packets
from tcplab.analysis.diagnose import diagnose_flows
from tcplab.analysis.table import data_flows
table = read_packets(sys.argv[1])
assert "numba" not in sys.modules
table.packets.to_pickle(sys.argv[1] + ".pkl")
json.dump([r.to_dict() for r in diagnose_flows(table, data_flows(table))], open(sys.argv[1] + ".json", "w"))
"""


def _interpreted(path: Path) -> tuple[pd.DataFrame, list]:
    subprocess.run([sys.executable, "-c", INTERPRETED, str(path)], check=True, timeout=300)
    return pd.read_pickle(f"{path}.pkl"), json.loads(Path(f"{path}.json").read_text())


def _same(path: Path) -> None:
    packets, verdicts = _interpreted(path)
    table = read_packets(path)
    assert not _jit.interpreted()  # this (test) process: compiled
    pd.testing.assert_frame_equal(packets, table.packets)
    # Through JSON both ways, so NaN and tuples compare as they print.
    assert verdicts == json.loads(json.dumps([r.to_dict() for r in diagnose_flows(table, data_flows(table))]))


@pytest.mark.parametrize("seed", (0, 3, 5))
def test_interpreted_kernels_give_the_compiled_tables_and_verdicts(tmp_path, seed):
    """Random captures with every event the expert analysis knows (loss, reordering, zero
    windows, keep-alives, cut options, IPv6), several flows each."""
    frames = random_capture(seed, flows=1 + seed % 5, packets=400, v6_share=0.4)
    path = tmp_path / f"random{seed}.pcap"
    write_pcap(path, [(t, ethernet(p)) for t, p in frames], 1, nanos=True, snaplen=(262144, 96)[seed % 2])
    _same(path)


@pytest.mark.skipif(not SMALL_PUBLIC, reason=f"no public captures at {CAPTURES}")
@pytest.mark.parametrize("name", [p.name for p in SMALL_PUBLIC])
def test_interpreted_kernels_agree_on_small_public_captures(tmp_path, name):
    copy = tmp_path / name
    copy.write_bytes((CAPTURES / name).read_bytes())
    _same(copy)


def test_a_tiny_capture_loads_neither_numba_nor_the_lab(tmp_path):
    """``tcplab diagnose`` of a tiny file, as the command runs it: the kernels interpreted,
    numba and pyroute2 never imported (together ~0.4 s of a 0.8 s start before)."""
    path = tmp_path / "tiny.pcap"
    write_pcap(path, [(t, ethernet(p)) for t, p in random_capture(1, flows=1, packets=40)], 1, nanos=True)
    code = ("import sys; from tcplab.commands import main; rc = main(['diagnose', sys.argv[1]]); "
            "from tcplab.analysis import _jit; "
            "print(json.dumps([rc, _jit.interpreted(), sorted(m for m in ('numba', 'pyroute2', 'tcplab.lab') "
            "if m in sys.modules)]))").replace("import sys;", "import json, sys;")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    rc, interpreted, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc in (0, 1), out.stderr
    assert interpreted and loaded == []


def test_a_larger_capture_or_kernels_already_loaded_keep_numba(tmp_path):
    """Past :data:`~tcplab.analysis._jit.INTERPRET_MAX_BYTES` the kernels are compiled; and
    once they are loaded compiled, a tiny file no longer changes that."""
    big, tiny = tmp_path / "big.pcap", tmp_path / "tiny.pcap"
    big.write_bytes(b"\0" * (_jit.INTERPRET_MAX_BYTES + 1))
    tiny.write_bytes(b"\0" * 100)
    code = ("import sys; from tcplab.analysis import _jit; a = _jit.interpret_if_small([sys.argv[1]]); "
            "import tcplab.analysis.packets; print(a, _jit.interpret_if_small([sys.argv[2]]), "
            "'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(big), str(tiny)], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "True"]
