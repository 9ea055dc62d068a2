"""The HTML report in a real headless Chromium: loads offline with no script error, draws."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from npu_migrate.commands.memory import command
from npu_migrate.memory.synthetic import training_snapshot
from .conftest import REAL_FILES
from .pngread import colours
from click.testing import CliRunner

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH "
                                    "(apt-get install -y chromium)")


def chromium(tmp_path, *args):
    profile = tmp_path / "profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


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
    findings = re.search(r'<ol id="findings">(.*?)</ol>', dom, re.S).group(1)
    assert "MEM003 device 1" in findings and "device 2" not in findings


@needs_chromium
def test_the_error_marker_catches_script_errors(page, tmp_path):
    """The harness itself: a page whose script throws must show data-error."""
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace("</body>", "<script>null.x = 1;</script></body>"))
    body = re.search(r"<body[^>]*>", chromium(tmp_path, "--dump-dom", broken.as_uri()).stdout)
    assert "data-error=" in body.group(0)
