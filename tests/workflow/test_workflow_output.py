"""Monorepo output: roll-ups per top-level package, and a progress bar with rate and ETA when
standard error is a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from workflow_helpers import CUDA, apply, write

CLEAN = "import os\n"


def test_summary_rolls_up_per_top_level_package(tmp_path, monkeypatch):
    for name, body in [("alpha/a1.py", CUDA), ("alpha/sub/a2.py", CLEAN), ("beta/b1.py", CUDA),
                       ("beta/b2.py", CUDA), ("gamma/g.py", "x.cuda(\n"), ("top.py", CLEAN)]:
        write(tmp_path / "mono" / name, body)
    result = apply("--check", "--format", "json", "mono", cwd=tmp_path, monkeypatch=monkeypatch)
    packages = json.loads(result.stdout)["summary"]["packages"]
    assert {k: (v["files"], v.get("changed", 0), v.get("failed", 0)) for k, v in packages.items()} == {
        ".": (1, 0, 0), "alpha": (2, 1, 0), "beta": (2, 2, 0), "gamma": (1, 0, 1)}
    text = apply("--check", "--no-cache", "mono", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "per package: .: 0/1 changed; alpha: 1/2 changed; beta: 2/2 changed; gamma: 0/1 changed, 1 failed" \
        in text.stderr


def run_with_terminal_stderr(args: list[str], cwd) -> tuple[int, str, str]:
    """The CLI with standard error on a pseudo-terminal and standard output piped."""
    leader, follower = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm")
    env.pop("NO_COLOR", None)
    process = subprocess.Popen([sys.executable, "-m", "npu_migrate", *args], cwd=cwd,
                               stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    stdout = process.stdout.read().decode() if process.stdout else ""
    process.wait(timeout=120)
    os.close(leader)
    return process.returncode, b"".join(chunks).decode("utf-8", "replace"), stdout


def test_progress_bar_labelled_by_mode_and_never_mixed_with_results(tmp_path):
    for i in range(240):
        write(tmp_path / f"pkg{i % 4}" / f"m{i}.py", (CUDA if i % 40 == 0 else CLEAN) + f"N = {i}\n")
    code, terminal, stdout = run_with_terminal_stderr(["apply", "--check", "--no-cache", "."], tmp_path)
    assert code == 1, terminal
    assert "checking" in terminal and "ETA" in terminal and "/240" in terminal
    assert "migrating" not in terminal
    assert "240 file(s) scanned, 6 would change, 0 failed" in terminal
    # the results, and only they, on standard output: no bar, no control codes
    assert sorted(stdout.splitlines()) == sorted(f"would migrate pkg0/m{i}.py" for i in range(0, 240, 40))
    code, terminal, _ = run_with_terminal_stderr(["apply", "--no-cache", "."], tmp_path)
    assert code == 0 and "migrating" in terminal and "checking" not in terminal
    piped = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--check", "--no-cache", "."],
                           cwd=tmp_path, capture_output=True, text=True, check=False)
    assert "ETA" not in piped.stderr and "checking" not in piped.stderr  # no bar in logs


def test_progress_shows_from_the_first_files_for_apply_and_analyze(tmp_path):
    """A small project on a terminal gets its progress too: a bar only from 200 files left a
    minute-long analyze of 49 files silent (issue 29)."""
    for i in range(12):
        write(tmp_path / "pkg" / f"m{i}.py", CUDA + f"N = {i}\n")
    code, terminal, stdout = run_with_terminal_stderr(["apply", "--check", "--no-cache", "."], tmp_path)
    assert code == 1 and "checking" in terminal and "/12" in terminal, terminal
    assert "checking" not in stdout and "\x1b" not in stdout
    code, terminal, stdout = run_with_terminal_stderr(["analyze", "--format", "json", "."], tmp_path)
    assert code == 0 and "analysing" in terminal and "/12" in terminal, terminal
    assert json.loads(stdout)["summary"]["files analysed"] == 12  # the report itself is untouched
    quiet = run_with_terminal_stderr(["apply", "--check", "--no-cache", "--quiet", "."], tmp_path)[1]
    assert "checking" not in quiet


def test_done_in_counts_the_whole_command(tmp_path, monkeypatch):
    """`done in` must cover finding the files and reading the project (which dominate a run whose
    results come from the cache), not only the per-file part: `done in 0.32 s` after 26 s."""
    import time

    for i in range(150):
        write(tmp_path / f"pkg{i % 5}" / f"m{i}.py", CUDA + "".join(f"def f{j}(x):\n    return x + {j}\n"
                                                                   for j in range(60)))
    assert apply("--check", ".", cwd=tmp_path, monkeypatch=monkeypatch).exit_code == 1  # fills the cache
    started = time.perf_counter()
    result = apply("--check", "--enable", "NPU500", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    wall = time.perf_counter() - started
    reported = float(result.stderr.rsplit("done in ", 1)[1].split()[0])
    assert reported >= 0.8 * wall, (reported, wall)
