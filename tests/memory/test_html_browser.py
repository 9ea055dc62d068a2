"""The HTML report in a real headless Chromium (driven over the DevTools protocol): it loads
offline without a script error and draws; its tables sort, open rows with their stacks and
follow the timeline; the flame graph, the pool view and the exact totals at any event agree
with the command line and the independent oracle; keys, clicks and the overview brush work;
it opens on the OOM device or the highest peak. Screenshots are written to the test's tmp
folder (and to $MEMORY_SCREENSHOTS when set, for a person to look at)."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.commands.memory import command
from npu_migrate.memory.synthetic import training_snapshot

from .browser import CHROMIUM, Browser
from .conftest import REAL_FILES
from .msmemscope_example import FIXTURES
from .pngread import colours
from .reference import load_raw
from .reference import replay as reference_replay

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH "
                                "(apt-get install -y chromium)")


def run(*args):
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def shot(page, tmp_path, name):
    path = page.screenshot(tmp_path / f"{name}.png")
    folder = os.environ.get("MEMORY_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / path.name).write_bytes(path.read_bytes())
    return path


@pytest.fixture(scope="module")
def browser():
    with Browser() as chromium:
        yield chromium


def opened(browser, path, fragment=""):
    page = browser.open(Path(path).as_uri() + (f"#{fragment}" if fragment else ""))
    attrs = page.attrs()
    assert attrs.get("render") == "ok" and "error" not in attrs, attrs
    return page


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A 40,000-event synthetic run: its pickle and HTML page."""
    folder = tmp_path_factory.mktemp("html")
    data = training_snapshot(target_events=40000, layers=8)
    data.pop("_facts")
    snapshot = folder / "snap.pickle"
    snapshot.write_bytes(pickle.dumps(data, protocol=5))
    page = folder / "report.html"
    run("report", snapshot, "--html", page, "--format", "json")
    return snapshot, page


@pytest.fixture(scope="module")
def leak_page(tmp_path_factory):
    """A 10-step run with a leak at train.py:48: its HTML page, JSON report and blocks."""
    from npu_migrate.memory.scenarios import deep_model

    folder = tmp_path_factory.mktemp("tables")
    data = deep_model(12, 10, leak_bytes=1 << 20)
    data.pop("_facts")
    snapshot = folder / "loop.pickle"
    snapshot.write_bytes(pickle.dumps(data))
    page = folder / "report.html"
    report = json.loads(run("report", snapshot, "--html", page, "--format", "json"))
    blocks = json.loads(run("blocks", snapshot, "--format", "json", "--limit", "100000"))
    return page, report, blocks, snapshot


def test_page_is_self_contained(synthetic):
    text = synthetic[1].read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)
    assert "cdn" not in text.lower() and "http://" not in text and "https://" not in text
    assert text.count("<script") == 2  # the data block and our own code


def test_loads_without_script_errors_and_draws(browser, synthetic, tmp_path):
    page = opened(browser, synthetic[1])
    attrs = page.attrs()
    assert int(attrs["drawn"]) > 100 and int(attrs["tableMatches"]) > 1000
    seen = colours(shot(page, tmp_path, "synthetic"))
    assert len(seen) > 50, "the screenshot looks blank"
    blue = sum(n for (r, g, b), n in seen.items() if abs(r - 40) < 30 and abs(g - 100) < 30
               and b > 180)
    assert blue > 200, "no allocated-memory curve (blue) on the timeline"


def test_the_error_marker_catches_script_errors(browser, synthetic, tmp_path):
    """The harness itself: a page whose script throws must show data-error."""
    broken = tmp_path / "broken.html"
    broken.write_text(synthetic[1].read_text().replace("</body>",
                                                       "<script>null.x = 1;</script></body>"))
    page = browser.open(broken.as_uri())
    assert "error" in page.attrs()


# ---- exact numbers at any event: totals, flame graph, pool view ---------------------------

def test_totals_flame_and_pool_at_any_event_match_the_oracle(browser, synthetic):
    snapshot, path = synthetic
    ref = reference_replay(load_raw(snapshot), 0)
    page = opened(browser, path)
    attrs = page.attrs()
    assert int(attrs["event"]) == ref["peak_index"]
    assert int(attrs["flameTotal"]) == ref["peak"]
    for event in (0, 1234, 20000, ref["peak_index"] - 7, len(ref["allocated"]) - 1):
        assert page.eval(f"window.memoryReport.allocatedAt({event})") == ref["allocated"][event]
        page.eval(f"window.memoryReport.setEvent({event})")
        page.wait_for(f"document.body.dataset.poolEvent === '{event}'")
        flame_total = int(page.attrs()["flameTotal"])
        assert flame_total == ref["allocated"][event]
        pool = json.loads(run("pool", snapshot, "--event", event, "--format", "json"))
        summary = pool["summary"]
        got = page.attrs()
        assert int(got["poolReserved"]) == summary["device 0 reserved"]
        assert int(got["poolFree"]) == summary["device 0 free"]
        assert int(got["poolLargest"]) == summary["device 0 largest free block"]


def test_arrow_keys_step_the_current_event(browser, synthetic):
    snapshot, path = synthetic
    ref = reference_replay(load_raw(snapshot), 0)
    page = opened(browser, path)
    peak = ref["peak_index"]
    for _ in range(3):
        page.key("ArrowLeft")
    page.wait_for(f"document.body.dataset.poolEvent === '{peak - 3}'")
    assert int(page.attrs()["flameTotal"]) == ref["allocated"][peak - 3]
    page.key("ArrowRight")
    page.wait_for(f"document.body.dataset.event === '{peak - 2}'")
    page.key("ArrowLeft", shift=True)  # 1% of the events
    step = round(len(ref["allocated"]) / 100)
    page.wait_for(f"document.body.dataset.poolEvent === '{peak - 2 - step}'")
    assert int(page.attrs()["flameTotal"]) == ref["allocated"][peak - 2 - step]


def test_overview_brush_selects_a_range(browser, synthetic):
    page = opened(browser, synthetic[1])
    before = page.eval("document.getElementById('range').textContent")
    page.drag("#overview", 0.3, 0.45)
    after = page.eval("document.getElementById('range').textContent")
    low, high, total = map(int, re.search(r"events (\d+)-(\d+) of (\d+)", after).groups())
    assert before != after and 0.15 * total < low < high < 0.5 * total
    assert high - low < 0.3 * total


def test_flame_views_and_zoom(browser, synthetic, tmp_path):
    page = opened(browser, synthetic[1])
    tree = json.loads(run("flame", synthetic[0], "--format", "json"))["flames"][0]["tree"]
    assert page.attrs()["flameTop"] == tree["children"][0]["name"]
    page.eval("var s=document.getElementById('flame-view'); s.value='stream';"
              "s.dispatchEvent(new Event('change'))")
    assert page.attrs()["flameTop"] == "stream 0x5a5a0000"
    page.eval("var s=document.getElementById('flame-view'); s.value='frame';"
              "s.dispatchEvent(new Event('change'))")
    height = page.eval("document.getElementById('flame').clientHeight")
    page.click("#flame", 0.2, 24 / height)  # the first row under the root: the widest frame
    label = page.eval("document.getElementById('flame-label').textContent")
    assert "zoomed into" in label
    shot(page, tmp_path, "flame_zoomed")
    page.click("#flame", 0.5, 8 / height)  # the top bar zooms back out
    assert "zoomed into" not in page.eval("document.getElementById('flame-label').textContent")


# ---- tables -----------------------------------------------------------------------------

def headers(page):
    return page.eval("Array.from(document.querySelectorAll('#table thead th'))"
                     ".map(th => th.textContent)")


def listed(page, column):
    index = headers(page).index(column)
    return page.eval(f"Array.from(document.querySelectorAll('#table tbody tr'))"
                     f".map(tr => tr.children[{index}].textContent)")


def test_block_view_columns(browser, leak_page):
    page = opened(browser, leak_page[0], "tab=blocks")
    for column in ("id", "size", "requested", "address", "state", "alloc event", "free event",
                   "lifetime (events)", "stream", "flags", "site"):
        assert column in headers(page)


def test_sorting_by_clicking_headers(browser, leak_page):
    page_path, _, blocks, _ = leak_page
    page = opened(browser, page_path)
    table = blocks["tables"][0]
    names = [c["name"] for c in table["columns"]]
    rows = [(r[names.index("size")], r[0]) for r in table["rows"]]
    head = headers(page).index("size") + 1
    page.click(f"#table thead th:nth-child({head})")
    assert page.attrs()["sort"] == "size:desc"
    ids = [int(v) for v in listed(page, "id")]
    assert ids == [i for _, i in sorted(rows, key=lambda r: (-r[0], r[1]))][:len(ids)]
    page.click(f"#table thead th:nth-child({head})")
    assert page.attrs()["sort"] == "size:asc"
    ids = [int(v) for v in listed(page, "id")]
    assert ids == [i for _, i in sorted(rows)][:len(ids)]


def test_opened_rows_show_their_stack(browser, leak_page):
    page = opened(browser, leak_page[0], "search=train.py:48")
    page.click("#table tbody tr:nth-child(1)")
    details = page.eval("document.getElementById('details').textContent")
    assert "call stack, outermost first:" in details and "train.py:48 train_step" in details
    assert page.attrs()["detailsStack"] == "yes"
    page = opened(browser, leak_page[0], "tab=events&search=train.py:48")
    page.click("#table tbody tr:nth-child(1)")
    details = page.eval("document.getElementById('details').textContent")
    assert details.startswith("event ") and "train.py:48 train_step" in details


def test_search_by_address_and_site(browser, leak_page):
    _, _, blocks, _ = leak_page
    rows = blocks["tables"][0]["rows"]
    columns = [c["name"] for c in blocks["tables"][0]["columns"]]
    leak_rows = [r for r in rows if r[columns.index("call_stack")] == "train.py:48 (train_step)"]
    address = leak_rows[0][columns.index("address")]
    page = opened(browser, leak_page[0], f"search={address}")
    assert page.attrs()["tableFirst"] == str(leak_rows[0][0])
    page = opened(browser, leak_page[0], "search=train.py:48")
    assert int(page.attrs()["tableMatches"]) == len(leak_rows)


def test_filters_by_size_and_state(browser, leak_page):
    everything = opened(browser, leak_page[0], "state=").attrs()
    big = opened(browser, leak_page[0], "min=1G").attrs()
    assert int(big["tableMatches"]) == 0 < int(everything["tableMatches"])
    page = opened(browser, leak_page[0], "state=0")
    assert set(listed(page, "state")) == {"active_allocated"}


def test_table_follows_the_timeline_selection(browser, leak_page):
    whole = opened(browser, leak_page[0], "tab=events").attrs()
    zoomed = opened(browser, leak_page[0], "tab=events&event=300").attrs()
    assert 0 < int(zoomed["tableMatches"]) < int(whole["tableMatches"])


def test_clicking_a_finding_highlights_its_blocks(browser, leak_page):
    page_path, report, _, _ = leak_page
    device_findings = [f for f in report["findings"] if f["device"] in (0, None)]
    index = next(i for i, f in enumerate(device_findings) if f["code"] == "MEM001")
    leak = device_findings[index]
    page = opened(browser, page_path, f"finding={index}")
    attrs = page.attrs()
    assert int(attrs["highlighted"]) == len(leak["blocks"]) == int(attrs["tableMatches"])
    leaked = opened(browser, page_path, "tab=leaked").attrs()
    assert int(leaked["tableMatches"]) == len(leak["blocks"])


def test_keyboard_navigation(browser, leak_page):
    page = opened(browser, leak_page[0])
    page.key("j")
    first = page.attrs()["selectedRow"]
    for key in "jjjk":
        page.key(key)
    assert page.attrs()["selectedRow"] != first
    page.key("2")
    assert page.attrs()["table"] == "events"
    page.key("3")
    assert page.attrs()["table"] == "sites"
    assert "train.py:48 (train_step)" in page.eval("document.querySelector('#table').textContent")
    page.key("n")
    assert int(page.attrs()["highlighted"]) > 0


# ---- opening device, real files, msMemScope -------------------------------------------------

def real(name):
    path = next((p for p in REAL_FILES if p.name == name), None)
    if path is None:
        pytest.skip(f"{name} absent (../shared)")
    return path


def test_real_multi_device_file_opens_on_its_oom(browser, tmp_path):
    path = real("multi_gpu_expandable_oom.pickle")
    html = tmp_path / "real.html"
    run("report", path, "--html", html, "--format", "json")
    page = opened(browser, html)  # no #device: the OOM's device is chosen
    attrs = page.attrs()
    assert attrs["device"] == "1" and attrs["event"] == "421" and attrs["poolEvent"] == "421"
    pool = json.loads(run("pool", path, "--event", 421, "--device", 1, "--format", "json"))
    assert int(attrs["poolFree"]) == pool["summary"]["device 1 free"]
    findings = page.eval("document.getElementById('findings').textContent")
    assert "MEM003 device 1" in findings and "device 2" not in findings
    shot(page, tmp_path, "real_oom")


def test_without_an_oom_the_page_opens_on_the_highest_peak(browser, tmp_path):
    path = real("snapshot_with_multi_devices.pkl")
    html = tmp_path / "multi.html"
    doc = json.loads(run("report", path, "--html", html, "--format", "json"))
    highest = max(doc["devices"], key=lambda d: d["peak"]["bytes"])["device"]
    assert opened(browser, html).attrs()["device"] == str(highest)


def test_msmemscope_page_has_threads_accesses_and_thresholds(browser, tmp_path):
    from .test_msmemscope import rows, write_csv

    source = write_csv(tmp_path / "memscope_dump_1.csv", rows())
    html = tmp_path / "msm.html"
    run("report", source, "--html", html)
    page = opened(browser, html)
    for column in ("allocation id", "process/thread", "first access (us)", "last access (us)",
                   "max access interval (us)", "accesses", "flags", "operator", "owner"):
        assert column in headers(page)
    flagged = int(page.attrs()["inefficient"])
    assert flagged >= 2
    page.eval("var i=document.getElementById('lazy'); i.value='99%';"
              "i.dispatchEvent(new Event('change'));"
              "var d=document.getElementById('delayed'); d.value='99%';"
              "d.dispatchEvent(new Event('change'))")
    assert int(page.attrs()["inefficient"]) < flagged
    page.key("5")
    assert page.attrs()["table"] == "inefficient"
    assert int(page.attrs()["tableMatches"]) == int(page.attrs()["inefficient"])


def test_msmemscope_leak_example_page(browser, tmp_path):
    html = tmp_path / "leaks.html"
    run("report", FIXTURES / "leaks.csv", "--html", html)
    page = opened(browser, html, "search=_to_copy")
    assert int(page.attrs()["tableMatches"]) == 2
    assert set(listed(page, "operator")) == {"aten._to_copy.default"}
    assert set(listed(page, "process/thread")) == {"3290097/3290097"}
    page.click("#table tbody tr:nth-child(1)")
    details = page.eval("document.getElementById('details').textContent")
    assert "operator aten._to_copy.default" in details and "allocation id" in details
    shot(page, tmp_path, "msmemscope_leak")


def test_fragmentation_finding_and_pool_view_count_free_memory_alike(browser, synthetic):
    from npu_migrate.memory.context import fmt_bytes

    snapshot, path = synthetic
    doc = json.loads(run(snapshot, "--format", "json"))
    device_findings = [f for f in doc["findings"] if f["device"] in (0, None)]
    index = next(i for i, f in enumerate(device_findings) if f["code"] == "MEM002")
    finding = device_findings[index]
    pool = json.loads(run("pool", snapshot, "--event", finding["event"], "--format", "json"))
    free = pool["summary"]["device 0 free"]
    assert f"of {fmt_bytes(free)} free in the pool" in finding["message"]
    page = opened(browser, path, f"finding={index}")
    page.wait_for(f"document.body.dataset.poolEvent === '{finding['event']}'")
    assert int(page.attrs()["poolFree"]) == free
