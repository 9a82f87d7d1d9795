"""The house style of tables: numbers as the prose writes them, no NaN, None or exponents, no
invented index column, headers in words, and the class that shrinks a wide table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tcplab.report.tables import GAP, WIDE_COLUMNS, cell_text, frame_html

THIN = "\u202f"


@pytest.mark.parametrize("value, text", [
    (32768.0, f"32{THIN}768"), (3.2768e4, f"32{THIN}768"), (262142, f"262{THIN}142"), (1234.5, f"1{THIN}234"),
    (152.34, "152.3"), (15.2734, "15.27"), (2.0, "2"), (0.0123, "0.0123"), (-0.5, "-0.5"), (1e-9, "0.000000001"), (2.18e-14, "0"),
    (float("nan"), GAP), (None, GAP), (pd.NA, GAP), ("", GAP), (np.int64(65536), f"65{THIN}536"), (math.inf, "∞"),
    (True, "yes"), (np.bool_(False), "no"), ([1, 2.5], "1, 2.5"), ([], GAP), (np.array([0.0, 1.0, 10.0]), "0, 1, 10"), ({"rtt": 0.5}, "rtt 0.5"), ("bbr", "bbr"),
])
def test_a_cell_is_written_as_the_prose_writes_numbers(value, text):
    assert cell_text(value) == text


def test_a_frame_has_no_raw_values_no_invented_index_and_headers_in_words():
    frame = pd.DataFrame({"goodput_bps": [1.5e7, np.nan], "rwnd": [3.277e4, None], "variant": ["a", "b"]})
    html = frame_html(frame)
    assert not any(raw in html for raw in ("NaN", "nan", "None", "e+0", "e-0", "<th></th>"))
    assert "goodput bps" in html and f"15{THIN}000{THIN}000" in html and f"32{THIN}770" in html
    named = frame_html(frame.set_index("variant"))
    assert named.count("<tr") == 3 and "<th>variant</th>" in named  # one header row, the index its first column
    assert "tcplab-wide" not in named


def test_a_series_and_a_wide_frame():
    assert "<td>rtt</td>" in frame_html(pd.Series({"rtt": "20 ms"}, name="setting"))
    wide = pd.DataFrame([range(WIDE_COLUMNS + 1)], columns=[f"c{i}" for i in range(WIDE_COLUMNS + 1)])
    assert "tcplab-wide" in frame_html(wide)


def test_a_short_header_stays_on_one_line_and_a_long_one_may_wrap():
    # A narrow column printed "连接" as 连 over 接 (case 08's zh page); a long header must still
    # wrap, or a wide table runs off the page.
    html = frame_html(pd.DataFrame({"连接": [1], "读取方停止后窗口关闭的时间 s": [2.5], "probe": [3]}))
    assert '<th style="white-space:nowrap">连接</th>' in html
    assert '<th style="white-space:nowrap">probe</th>' in html
    assert "<th>读取方停止后窗口关闭的时间 s</th>" in html
