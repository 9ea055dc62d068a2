"""The HTML report in a real headless Chromium: loads offline with no script error, draws."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from npu_migrate.commands.memory import command
from npu_migrate.memory.synthetic import training_snapshot

from .conftest import REAL_FILES
from .pngread import colours

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH "
                                    "(apt-get install -y chromium)")


def chromium(tmp_path, *args):
    profile = tmp_path / "profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """One HTML report of a 40,000-event synthetic run, shared by the tests below."""
    import pickle

    folder = tmp_path_factory.mktemp("html")
    data = training_snapshot(target_events=40000, layers=8)
    data.pop("_facts")
    snapshot = folder / "snap.pickle"
    snapshot.write_bytes(pickle.dumps(data, protocol=5))
    out = folder / "report.html"
    result = CliRunner().invoke(command, ["report", str(snapshot), "--html", str(out),
                                          "--format", "json"])
    assert result.exit_code == 0, result.output
    return out


def test_page_is_self_contained(page):
    text = page.read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)
    assert "cdn" not in text.lower() and "http://" not in text and "https://" not in text
    assert text.count("<script") == 2  # the data block and our own code


@needs_chromium
def test_loads_without_script_errors_and_draws(page, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-render="ok"' in body and "data-error" not in body
    assert int(re.search(r'data-drawn="(\d+)"', body).group(1)) > 100
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1000,900", page.as_uri())
    seen = colours(shot)
    assert len(seen) > 50, "the screenshot looks blank"
    blue = sum(n for (r, g, b), n in seen.items() if abs(r - 40) < 30 and abs(g - 100) < 30
               and b > 180)
    assert blue > 200, "no allocated-memory curve (blue) on the timeline"


@needs_chromium
@pytest.mark.skipif(not REAL_FILES, reason="real snapshots absent (../shared)")
def test_real_multi_device_file_opens_on_its_oom(tmp_path):
    path = next((p for p in REAL_FILES if "multi_gpu" in p.name), None)
    if path is None:
        pytest.skip("multi_gpu_expandable_oom.pickle absent")
    page = tmp_path / "real.html"
    result = CliRunner().invoke(command, ["report", str(path), "--html", str(page),
                                          "--format", "json"])
    assert result.exit_code == 0, result.output
    # a link to the OOM event opens device 1 zoomed on it
    dom = chromium(tmp_path, "--dump-dom", page.as_uri() + "#device=1&event=421").stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-render="ok"' in body and "data-error" not in body
    low, high = map(int, re.search(r'id="range">events (\d+)-(\d+) of 596<', dom).groups())
    assert low < 421 < high and high - low < 596
    assert 'id="moment-label">event 421 ' in dom
    findings = re.search(r'<ol id="findings">(.*?)</ol>', dom, re.DOTALL).group(1)
    assert "MEM003 device 1" in findings and "device 2" not in findings


@needs_chromium
def test_the_error_marker_catches_script_errors(page, tmp_path):
    """The harness itself: a page whose script throws must show data-error."""
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace("</body>", "<script>null.x = 1;</script></body>"))
    body = re.search(r"<body[^>]*>", chromium(tmp_path, "--dump-dom", broken.as_uri()).stdout)
    assert "data-error=" in body.group(0)


# ---- tables: Block view, Event view, top sites, leaked blocks; search, filters, findings,
# ---- keyboard (driven through the page's #hash parameters, then read back from the DOM)

@pytest.fixture(scope="module")
def leak_page(tmp_path_factory):
    """A 10-step run with a leak at train.py:48: its HTML page and its JSON report."""
    import json
    import pickle

    from npu_migrate.memory.scenarios import deep_model

    folder = tmp_path_factory.mktemp("tables")
    data = deep_model(12, 10, leak_bytes=1 << 20)
    data.pop("_facts")
    snapshot = folder / "loop.pickle"
    snapshot.write_bytes(pickle.dumps(data))
    out = folder / "report.html"
    result = CliRunner().invoke(command, ["report", str(snapshot), "--html", str(out),
                                          "--format", "json"])
    assert result.exit_code == 0, result.output
    blocks = CliRunner().invoke(command, ["blocks", str(snapshot), "--format", "json",
                                          "--limit", "100000"])
    return out, json.loads(result.output), json.loads(blocks.output)


def body_of(tmp_path, page, fragment):
    dom = chromium(tmp_path, "--dump-dom", page.as_uri() + "#" + fragment).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-render="ok"' in body and "data-error" not in body, body
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))
    return attrs, dom


@needs_chromium
def test_block_view_lists_blocks_with_mindstudio_columns(leak_page, tmp_path):
    page, _, _ = leak_page
    attrs, dom = body_of(tmp_path, page, "tab=blocks")
    assert attrs["table"] == "blocks" and int(attrs["table-rows"]) > 0
    head = re.search(r"<thead>(.*?)</thead>", dom, re.DOTALL).group(1)
    for column in ("id", "requested size", "size", "address", "state", "alloc event",
                   "free event", "site"):
        assert f"<th>{column}</th>" in head


@needs_chromium
def test_search_by_address_and_site(leak_page, tmp_path):
    page, _, blocks = leak_page
    rows = blocks["tables"][0]["rows"]
    columns = [c["name"] for c in blocks["tables"][0]["columns"]]
    leak_rows = [r for r in rows if r[columns.index("call_stack")] == "train.py:48 (train_step)"]
    address = leak_rows[0][columns.index("address")]
    attrs, dom = body_of(tmp_path, page, f"search={address}")
    assert attrs["table-first"] == str(leak_rows[0][0])
    assert address in re.search(r"<tbody>(.*?)</tbody>", dom, re.DOTALL).group(1)
    attrs, dom = body_of(tmp_path, page, "search=train.py:48")
    assert int(attrs["table-matches"]) == len(leak_rows)


@needs_chromium
def test_filters_by_size_and_state(leak_page, tmp_path):
    page, _, _ = leak_page
    everything, _ = body_of(tmp_path, page, "state=")
    big, _ = body_of(tmp_path, page, "min=1G")
    assert int(big["table-matches"]) == 0 < int(everything["table-matches"])
    _, dom = body_of(tmp_path, page, "state=0")
    body = re.search(r"<tbody>(.*?)</tbody>", dom, re.DOTALL).group(1)
    assert "freed" not in body and "active_allocated" in body


@needs_chromium
def test_table_follows_the_timeline_selection(leak_page, tmp_path):
    page, _, _ = leak_page
    whole, _ = body_of(tmp_path, page, "tab=events")
    zoomed, _ = body_of(tmp_path, page, "tab=events&event=300")
    assert 0 < int(zoomed["table-matches"]) < int(whole["table-matches"])


@needs_chromium
def test_clicking_a_finding_highlights_its_blocks(leak_page, tmp_path):
    page, report, _ = leak_page
    device_findings = [f for f in report["findings"] if f["device"] in (0, None)]
    index = next(i for i, f in enumerate(device_findings) if f["code"] == "MEM001")
    leak = device_findings[index]
    attrs, dom = body_of(tmp_path, page, f"finding={index}")
    assert int(attrs["highlighted"]) == len(leak["blocks"]) == int(attrs["table-matches"])
    assert dom.count('class="hl') == len(leak["blocks"])
    leaked, _ = body_of(tmp_path, page, "tab=leaked")
    assert int(leaked["table-matches"]) == len(leak["blocks"])


@needs_chromium
def test_keyboard_navigation(leak_page, tmp_path):
    page, _, _ = leak_page
    first, _ = body_of(tmp_path, page, "keys=j")
    second, _ = body_of(tmp_path, page, "keys=jjjk")  # down three, up one
    third, _ = body_of(tmp_path, page, "keys=jjj")
    assert first["selected-row"] != second["selected-row"] != third["selected-row"]
    events, _ = body_of(tmp_path, page, "keys=2")
    sites, dom = body_of(tmp_path, page, "keys=3")
    assert events["table"] == "events" and sites["table"] == "sites"
    assert "train.py:48 (train_step)" in dom
    nxt, _ = body_of(tmp_path, page, "keys=n")
    assert int(nxt["highlighted"]) > 0


@needs_chromium
def test_msmemscope_block_view_has_owner_and_accesses(tmp_path):
    from .test_leak_evidence import msmemscope_rows
    from .test_msmemscope import write_csv

    source = write_csv(tmp_path / "memscope_dump_1.csv", msmemscope_rows())
    page = tmp_path / "msm.html"
    result = CliRunner().invoke(command, ["report", str(source), "--html", str(page)])
    assert result.exit_code == 0, result.output
    attrs, dom = body_of(tmp_path, page, "search=history")
    head = re.search(r"<thead>(.*?)</thead>", dom, re.DOTALL).group(1)
    assert "<th>owner</th>" in head and "<th>first access (us)</th>" in head
    assert int(attrs["table-matches"]) == 6  # the six never-freed PTA@user@history blocks
