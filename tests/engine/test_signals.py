"""Stop signals and a killed parent, with real processes and real signals (issue 13, defect 4):
SIGTERM and SIGHUP stop a run like Ctrl-C (exit 128 + n); no worker outlives the main process,
even one killed with SIGKILL, so a CI step reading the output never hangs; no temp file is left
in sight of git, and the next run removes what a killed one left."""

import os
import signal
import subprocess
import sys
import time

import pytest
from process_table import alive, children

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = 60
BODY = "".join(f"def f{i}(x):\n    y = x.cuda()\n    torch.cuda.synchronize()\n    return y\n\n\n"
               for i in range(150))
SOURCE = "import torch\n\n\n" + BODY


def migrated_source():
    from npu_migrate.apply.engine import migrate_source

    return migrate_source(SOURCE, select=["NPU10"])


@pytest.fixture
def tree(tmp_path):
    for index in range(FILES):
        (tmp_path / f"m{index:03}.py").write_text(SOURCE)
    return tmp_path


def from_a_terminal():
    """The dispositions of a command started from a terminal. Without this the child would inherit
    the suite's: a suite started in the background (`cmd &`, nohup) ignores SIGINT (and SIGHUP),
    and the tool keeps an inherited "ignore" (see the nohup test below)."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def under_nohup():
    """What `nohup cmd` and a background job of a script (`cmd &` without job control) give."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def start(tree, preexec_fn=from_a_terminal):
    command = [sys.executable, "-m", "npu_migrate", "apply", "--no-cache", "--isolated",
               "--select", "NPU10", "-j", "2", "."]
    process = subprocess.Popen(command, cwd=tree, env=dict(os.environ, PYTHONPATH=ROOT),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec_fn)
    deadline = time.monotonic() + 60
    while len(children(process.pid)) < 2:  # both workers started: the run is under way
        assert process.poll() is None, "the run ended before it could be signalled"
        assert time.monotonic() < deadline, "no workers after 60 s"
        time.sleep(0.02)
    time.sleep(0.3)
    return process, children(process.pid)


def assert_lossless(tree, expect_all_migrated=False):
    new = migrated_source()
    states = [(tree / f"m{i:03}.py").read_text() for i in range(FILES)]
    assert all(text in (SOURCE, new) for text in states)  # never half of either
    if expect_all_migrated:
        assert all(text == new for text in states)
    assert not [n for n in os.listdir(tree) if n.startswith(".npu-migrate")]


def wait_gone(pids, seconds=15):
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_stops_cleanly_with_128_plus_n(tree, signum):
    process, workers = start(tree)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, err.decode()
    assert b"interrupted" in err and b"Traceback" not in err
    assert wait_gone(workers) == []
    assert_lossless(tree)


def test_under_nohup_sighup_and_sigint_are_ignored_as_inherited_and_sigterm_still_stops(tree):
    """`nohup npu-migrate apply .` or `npu-migrate apply . &` in a script: the terminal closing
    (SIGHUP) or a Ctrl-C meant for the foreground job (SIGINT) must not stop the run (issue 29)."""
    process, workers = start(tree, preexec_fn=under_nohup)
    process.send_signal(signal.SIGHUP)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()
    assert b"interrupted" not in err
    assert_lossless(tree, expect_all_migrated=True)
    for index in range(FILES):  # again, from the original sources: SIGTERM is not inherited-ignored
        (tree / f"m{index:03}.py").write_text(SOURCE)
    process, workers = start(tree, preexec_fn=under_nohup)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err.decode()
    assert wait_gone(workers) == []
    assert_lossless(tree)


def test_workers_die_with_a_killed_parent_and_the_output_pipes_close(tree):
    process, workers = start(tree)
    process.kill()
    # the pipes reach EOF only when every process holding them (the workers) is gone
    process.communicate(timeout=30)
    assert wait_gone(workers) == []
    rerun = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--no-cache", "--isolated",
                            "--select", "NPU10", "-j", "2", "."], cwd=tree,
                           env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert_lossless(tree, expect_all_migrated=True)  # and nothing left behind by the killed run
