"""Monorepo runs: failures stay with their file and are listed at the end; an interrupted run
leaves every file whole and a second run finishes the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from npu_migrate.apply.engine import migrate_source

from workflow_helpers import CUDA, apply, cli, write

BROKEN = {
    "bad/syntax.py": "import torch\nx = torch.ones(2).cuda(\n",
    "bad/encoding.py": "# -*- coding: no-such-codec -*-\nx.cuda()\n",
    "bad/latin.py": b"import torch\nname = '\xe9'\nx.cuda()\n",
}


def test_failures_are_isolated_and_listed_at_the_end(tmp_path, monkeypatch):
    good = [write(tmp_path / f"good/g{i}.py", CUDA) for i in range(3)]
    for name, body in BROKEN.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body if isinstance(body, bytes) else body.encode())
    before = {name: (tmp_path / name).read_bytes() for name in BROKEN}
    result = apply("--no-color", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 1
    assert all(".npu()" in g.read_text() for g in good)  # the good files were migrated anyway
    assert {name: (tmp_path / name).read_bytes() for name in BROKEN} == before  # bad ones untouched
    tail = result.stderr.split("failed files (left untouched):", 1)
    assert len(tail) == 2, result.stderr
    listed = [line.strip() for line in tail[1].splitlines() if line.startswith("  ")]
    assert sorted(line.split(":", 1)[0] for line in listed) == sorted(BROKEN)
    assert "6 file(s) scanned, 3 migrated, 3 failed" in result.stderr
    payload = json.loads(apply("--check", "--format", "json", ".", cwd=tmp_path,
                               monkeypatch=monkeypatch).stdout)
    assert payload["summary"]["files_failed"] == 3
    assert sorted(f.split(":", 1)[0] for f in payload["summary"]["failures"]) == sorted(BROKEN)
    # failures are cached like any result (the key changes with the tool): still reported,
    # nothing parsed again
    again = json.loads(apply("--check", "--format", "json", ".", cwd=tmp_path,
                             monkeypatch=monkeypatch).stdout)["summary"]
    assert again["failures"] == payload["summary"]["failures"]
    assert again["files_cached"] == 6 and again["files_parsed"] == 0


def _default_interrupt() -> None:
    """The child gets Ctrl-C's default disposition, as a process started from a terminal has.
    Without this it would inherit the suite's: a suite started in the background (`cmd &`,
    nohup, many CI runners) ignores SIGINT, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_run_leaves_whole_files_and_a_second_run_finishes(tmp_path):
    body = "import torch\n" + "".join(f"t{i} = torch.zeros({i}).cuda()\nok{i} = t{i}.is_cuda\n"
                                      for i in range(2))
    expected = migrate_source(body)
    # many files, so that the run is still going when the interrupt lands, even on a loaded machine
    files = [write(tmp_path / f"pkg{i % 8}" / f"m{i:03}.py", body) for i in range(300)]
    process = subprocess.Popen([sys.executable, "-m", "npu_migrate", "apply", "--jobs", "2", "."],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=_default_interrupt)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if sum(f.read_text() != body for f in files[:20]) >= 2:
            break
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Run again" in err
    texts = [f.read_text() for f in files]
    assert all(t in (body, expected) for t in texts)  # never half-written
    done = sum(t == expected for t in texts)
    assert 0 < done < len(files), f"{done} of {len(files)} done: the interrupt was not mid-run"
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".npu-migrate-") and p.suffix == ".tmp"]
    second = cli("apply", ".", cwd=tmp_path, timeout=300)
    assert second.returncode == 0, second.stderr
    assert all(f.read_text() == expected for f in files)
    assert cli("apply", "--check", ".", cwd=tmp_path).returncode == 0
