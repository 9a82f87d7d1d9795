"""User-facing strings and the CSS they end up in."""

from __future__ import annotations

import json
import re

from tcplab.report.editions import EDITIONS
from tcplab.report.handout import STATUSES
from tcplab.report.templating import TEMPLATES_DIR, counter_content, css_string, format_value
from tcplab.words import STRINGS_DIR, Messages


def test_missing_translation_falls_back_to_english():
    t = Messages("xx")
    assert t("status.passed") == "passed"
    assert t("scores.summary", passed=1, total=2) == "1 of 2 checks passed"


def test_labels_translate_codes_and_keep_unknown_ones():
    t = Messages("en")
    assert t.label("backend", "delayline") == "delay line"
    assert t.label("backend", "something-new") == "something-new"
    assert t.label("backend", None) == "unknown"


def test_a_check_name_built_from_parameters_is_translated_with_its_values():
    zh, en = Messages("zh"), Messages("en")
    # The course's defaults and values no run of it has used read the same way.
    assert zh.check_name("Nagle stall at 20ms") == "20ms 下的 Nagle 停顿"
    assert zh.check_name("Nagle stall at 35ms") == "35ms 下的 Nagle 停顿"
    assert zh.check_name("64KB cubic: times slower than unset") == "64KB cubic：比未设置慢的倍数"
    # Of two patterns that match, the one with more fixed text wins.
    assert zh.check_name("Nagle stall at 7ms minus at 1ms: longer on the longer path") == \
        "7ms 与 1ms 下 Nagle 停顿之差：路径越长停顿越长"
    # A kernel in front, as case 02 compares two kernels, stays in front.
    assert zh.check_name("6.1.176 (UML): median window vs tcp_adv_win_scale 1 rule") == \
        "6.1.176 (UML): 窗口中位数与 tcp_adv_win_scale 1 规则之比"
    # English gives the name back as it was built; a name no key knows stays itself.
    assert en.check_name("Nagle stall at 35ms") == "Nagle stall at 35ms"
    assert zh.check_name("a check nobody keyed") == "a check nobody keyed"


def test_a_column_header_keeps_the_kernel_names_in_it():
    en, zh = Messages("en"), Messages("zh")
    # One identifier is a field name, put in words; a header of several words keeps its
    # underscores, which belong to kernel names.
    assert en.column("goodput_bps") == "goodput bps"
    assert en.column("receiver SO_RCVBUF") == "receiver SO_RCVBUF"
    assert en.column("squeezed-tcp_mem") == "squeezed-tcp_mem"
    assert zh.column("squeezed-tcp_mem") == "收紧的 tcp_mem"
    assert en.column("a header no key knows_it") == "a header no key knows_it"


def test_every_key_used_in_templates_exists():
    keys = set(json.loads((STRINGS_DIR / "en.json").read_text()))
    used = set()
    for template in TEMPLATES_DIR.glob("*.j2"):
        used |= set(re.findall(r"""\bt\(\s*["']([\w.]+)["']""", template.read_text()))
    for module in TEMPLATES_DIR.parent.glob("*.py"):
        used |= set(re.findall(r"""["']((?:rule|scores|status|env|handout|page|value)\.\w+)["']""",
                               module.read_text()))
    # Keys built from a value ("status." ~ s.status) must exist for every value.
    used = {k for k in used if not k.endswith(".")}
    used |= {f"status.{s}" for s in STATUSES} | {f"edition.{e}" for e in EDITIONS}
    assert used <= keys, sorted(used - keys)


def test_css_strings_cannot_break_out_of_the_style_element():
    out = str(css_string('a "quoted" </style> \\ 中文'))
    assert out.startswith('"') and out.endswith('"')
    assert "</style>" not in out and '"quoted"' not in out
    assert "中文" in out


def test_page_counter_content_keeps_translated_words_around_counters():
    assert str(counter_content("page {page} of {pages}")) == '"page " counter(page) " of " counter(pages)'
    assert str(counter_content("第 {page} 页")) == '"第 " counter(page) " 页"'


def test_values_are_shown_with_four_significant_digits():
    assert format_value(12.345678, "ms") == "12.35 ms"
    assert format_value(None) == "—"
    assert format_value("link") == "link"
