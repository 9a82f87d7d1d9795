"""User-facing strings and the CSS they end up in."""

from __future__ import annotations

import json
import re

from tcplab.report.editions import EDITIONS
from tcplab.report.handout import STATUSES
from tcplab.report.templating import TEMPLATES_DIR, counter_content, css_string, format_value
from tcplab.units import ParameterError
from tcplab.words import Messages, all_words, choice_only_fields, speaking, template_fields


def test_missing_translation_falls_back_to_english():
    t = Messages("xx")
    assert t("status.passed") == "passed"
    assert t("scores.summary", passed=1, total=2) == "1 of 2 checks passed"


def test_labels_translate_codes_and_keep_unknown_ones():
    t = Messages("en")
    assert t.label("backend", "delayline") == "delay line"
    assert t.label("backend", "something-new") == "something-new"
    assert t.label("backend", None) == "unknown"


def test_a_lab_kernels_kind_is_said_in_the_pages_language():
    zh, en = Messages("zh"), Messages("en")
    label = "6.18.44 (host), 6.18.44 (user namespace), 6.1.176 (UML)"  # as runs and scores keep it
    assert zh.kernels(label) == "6.18.44 (主机), 6.18.44 (用户命名空间), 6.1.176 (UML)"
    assert en.kernels(label) == label
    assert zh.kernels("6.18.44-fc-v657") == "6.18.44-fc-v657"  # a release alone has no kind to say
    assert zh.kernels("6.9 (a kind no key has)") == "6.9 (a kind no key has)" and zh.kernels(None) == ""


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
        "6.1.176 (UML): 窗口中位数 对比 tcp_adv_win_scale 1 规则"
    # English gives the name back as it was built; a name no key knows stays itself.
    assert en.check_name("Nagle stall at 35ms") == "Nagle stall at 35ms"
    assert zh.check_name("a check nobody keyed") == "a check nobody keyed"


def test_a_word_agrees_with_the_number_the_page_writes():
    en, zh = Messages("en"), Messages("zh")
    said = lambda count: en("evidence.application-limited", n_gaps=count, idle="1 s", share="5 %")
    assert said("1").startswith("the sender sat idle with nothing in flight 1 time, for 1 s")
    assert "in flight 3 times," in said("3") and "in flight 1.5 times," in said("1.5")
    assert "in flight 0 times," in said("0")  # English: only a lone 1 is singular
    assert en("diagnosis.line.captures", captures="1", flows="2", counts="x") == "1 capture, 2 flows: x"
    # A language without plurals writes its word once; a choice names its number, which the
    # translation must still fill in.
    assert "{" not in zh("diagnosis.line.captures", captures="1", flows="2", counts="x")
    assert template_fields("{n} {n|flow|flows}: {counts}") == {"n", "counts"}
    english = all_words("en")
    lone = [k for k, v in english.items() if not k.startswith(("error.", "pcap_error."))
            and re.search(r"\{\w+\} (?:times|round trips|segments|probes)\b|\w\(s\)", v)]
    assert not lone, lone  # a count's noun that cannot agree with it


def test_a_unit_that_is_a_word_agrees_with_its_value():
    """Checks tables and rules write "1 segment" and "at least 2 round trips"; a language
    without plurals may leave the choosing number out of its unit."""
    en, zh = Messages("en"), Messages("zh")
    assert format_value(1, "segments", en) == "1 segment" and format_value(1.0, "round trips", en) == "1 round trip"
    assert format_value(2, "segments", en) == "2 segments" and format_value(0.5, "pages", en) == "0.5 pages"
    assert format_value(1, "ms", en) == "1 ms" and en.unit("segments") == "segments"
    assert "{" not in format_value(1, "segments", zh) and "{" not in zh.unit("probes")
    assert choice_only_fields("{n|segment|segments}") == {"n"} and choice_only_fields("{n} {n|flow|flows}") == set()


def test_a_column_header_keeps_the_kernel_names_in_it():
    en, zh = Messages("en"), Messages("zh")
    # One identifier is a field name, put in words; a header of several words keeps its
    # underscores, which belong to kernel names.
    assert en.column("goodput_bps") == "goodput bps"
    assert en.column("receiver SO_RCVBUF") == "receiver SO_RCVBUF"
    assert en.column("squeezed-tcp_mem") == "squeezed-tcp_mem"
    assert zh.column("squeezed-tcp_mem") == "收紧的 tcp_mem"
    assert en.column("a header no key knows_it") == "a header no key knows_it"


def test_an_error_is_said_in_the_language_in_force_where_it_arose():
    zh = Messages("zh")
    # Phrases are translated part by part: the range and "or unset" around the kind of value.
    assert zh.error_phrase("a whole number from 1 to 1000, or unset") == "整数，范围 1 至 1000，或不设置"
    assert zh.error_phrase("a phrase no key has yet") == "a phrase no key has yet"  # still reads
    # A placeholder may be named like the lookup's own argument (key).
    assert zh.error_phrase("net.core.rmem_max is shared by the whole machine; set it through host_settings "
                           "(HostGuard)").startswith("net.core.rmem_max 由整台机器共享")
    refused = ("mtu", 100, "a whole number from 576 to 9000", "out of range")
    assert str(ParameterError(*refused)) == (
        "mtu: 100 is not accepted (out of range); accepted: a whole number from 576 to 9000")
    with speaking("zh"):
        said = str(ParameterError(*refused))
    assert said == "mtu：不接受 100（超出范围）；可接受：整数，范围 576 至 9000"
    assert "is not accepted" in str(ParameterError(*refused))  # the block is over: English again


def test_every_english_error_phrase_is_its_own_key():
    # Code writes its phrases in English and the strings file keys them by that text (the
    # templates by it with placeholders): an English value that differed would change the
    # English errors.
    english = all_words("en")
    phrases = {key: value for key, value in english.items() if key.startswith("error.")}
    assert len(phrases) >= 40 and all(key == f"error.{value}" for key, value in phrases.items())


def test_every_key_used_in_templates_exists():
    keys = set(all_words("en"))
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
