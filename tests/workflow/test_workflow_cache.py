"""The result cache: unchanged files are not parsed again, entries are keyed by content, tool,
rules and configuration, concurrent runs are safe, corrupt entries are rebuilt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from npu_migrate.apply.cache import _hash_tree
from npu_migrate.apply.engine import migrate_source

from workflow_helpers import CUDA, apply, cli, git, summary_of, write

CLEAN = "import os\nprint(os.getcwd())\n"


def tree(root: Path, count: int = 6) -> list[Path]:
    files = []
    for i in range(count):
        body = CUDA if i % 2 == 0 else CLEAN
        files.append(write(root / f"pkg{i % 3}" / f"m{i}.py", body + f"VALUE_{i} = {i}\n"))
    return files


def check_json(root: Path, monkeypatch, *extra: str) -> dict:
    result = apply("--check", "--format", "json", *extra, ".", cwd=root, monkeypatch=monkeypatch)
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_second_run_parses_nothing(tmp_path, monkeypatch):
    tree(tmp_path)
    cold = check_json(tmp_path, monkeypatch)
    warm = check_json(tmp_path, monkeypatch)
    assert cold["summary"]["files_parsed"] >= 3 and cold["summary"]["files_cached"] == 0
    assert warm["summary"]["files_parsed"] == 0 and warm["summary"]["files_cached"] == 6
    assert warm["files"] == cold["files"]
    assert {k: v for k, v in warm["summary"].items() if k not in ("files_parsed", "files_cached")} == \
        {k: v for k, v in cold["summary"].items() if k not in ("files_parsed", "files_cached")}


def test_only_the_edited_file_is_parsed_again(tmp_path, monkeypatch):
    files = tree(tmp_path)
    check_json(tmp_path, monkeypatch)
    files[0].write_text(files[0].read_text() + "y = x.cuda()\n")
    again = check_json(tmp_path, monkeypatch)
    assert again["summary"]["files_parsed"] == 1 and again["summary"]["files_cached"] == 5
    assert again["summary"]["edits_per_rule"]["NPU101"] == 4


def test_cached_results_are_written_exactly_like_fresh_ones(tmp_path, monkeypatch):
    files = tree(tmp_path)
    expected = {f: migrate_source(f.read_text()) for f in files}
    check_json(tmp_path, monkeypatch)  # fills the cache
    result = apply("--format", "json", ".", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 0 and summary_of(result)["files_cached"] == 6
    assert {f: f.read_text() for f in files} == expected


def test_no_cache_bypasses_reading_and_writing(tmp_path, monkeypatch):
    tree(tmp_path)
    for _ in range(2):
        run = check_json(tmp_path, monkeypatch, "--no-cache")
        assert run["summary"]["files_cached"] == 0 and run["summary"]["files_parsed"] >= 3
    assert not (tmp_path / ".npu-migrate-cache").exists()
    check_json(tmp_path, monkeypatch)
    assert check_json(tmp_path, monkeypatch, "--no-cache")["summary"]["files_cached"] == 0


def test_corrupt_entries_are_ignored_and_rebuilt(tmp_path, monkeypatch):
    tree(tmp_path)
    cold = check_json(tmp_path, monkeypatch)
    entries = sorted((tmp_path / ".npu-migrate-cache").glob("*/*.json"))
    texts = sorted((tmp_path / ".npu-migrate-cache").glob("*/*.txt"))
    assert len(entries) == 6 and len(texts) == 3  # the new text of each file that changes
    damage = [b"", b"{not json", b"\xff\xfe\x00garbage", json.dumps({"format": 3}).encode(),
              json.dumps({"format": 3, "new_text": 5, "edits": [], "diagnostics": []}).encode(),
              json.dumps({"format": 3, "new_text": None, "edits": [["NPU101"]], "diagnostics": []}).encode()]
    for entry, data in zip(entries, damage):
        entry.write_bytes(data)
    rebuilt = check_json(tmp_path, monkeypatch)
    assert rebuilt["files"] == cold["files"]
    assert rebuilt["summary"]["files_cached"] == 0
    for entry in entries:  # every damaged entry was rewritten whole
        assert json.loads(entry.read_text())["format"] == 3
    assert check_json(tmp_path, monkeypatch)["summary"]["files_cached"] == 6
    # a new text that no longer matches its entry (same size, other bytes; or cut short)
    first, second = texts[0], texts[1]
    first.write_bytes(first.read_bytes().replace(b"npu", b"NPU"))
    second.write_bytes(second.read_bytes()[:-3])
    again = check_json(tmp_path, monkeypatch)
    assert again["files"] == cold["files"] and again["summary"]["files_cached"] == 4
    assert check_json(tmp_path, monkeypatch)["summary"]["files_cached"] == 6


def test_concurrent_runs_share_one_cache_safely(tmp_path):
    for i in range(48):
        write(tmp_path / f"d{i % 4}" / f"f{i}.py", (CUDA if i % 3 else CLEAN) + f"N = {i}\n")
    args = ["apply", "--check", "--format", "json", "--jobs", "1", "."]
    command = [sys.executable, "-m", "npu_migrate", *args]
    procs = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], [err for _, err in outputs]
    runs = [json.loads(out) for out, _ in outputs]
    assert runs[0]["files"] == runs[1]["files"]
    assert all(r["summary"]["files_scanned"] == 48 for r in runs)
    cache = tmp_path / ".npu-migrate-cache"
    assert not list(cache.rglob("*.tmp"))
    warm = cli(*args, cwd=tmp_path)
    warm_run = json.loads(warm.stdout)
    assert warm_run["summary"]["files_cached"] == 48 and warm_run["summary"]["files_parsed"] == 0
    assert warm_run["files"] == runs[0]["files"]


def test_the_cache_folder_stays_out_of_git(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    tree(tmp_path, 2)
    check_json(tmp_path, monkeypatch)
    status = git(tmp_path, "status", "--porcelain", "--untracked-files=all")
    assert ".npu-migrate-cache" not in status and "pkg0/m0.py" in status


def test_the_tool_fingerprint_follows_file_contents(tmp_path):
    import hashlib

    write(tmp_path / "rules" / "a.py", "x = 1\n")
    write(tmp_path / "data" / "m.json", "{}\n")

    def fingerprint() -> str:
        digest = hashlib.sha256()
        _hash_tree(digest, str(tmp_path))
        return digest.hexdigest()

    before = fingerprint()
    assert fingerprint() == before
    write(tmp_path / "data" / "m.json", '{"cuda": "npu"}\n')
    assert fingerprint() != before


def test_a_warm_run_fetches_changed_files_when_their_turn_comes(tmp_path):
    """Cached results of files that change are not all held in memory before the first one is
    yielded: they are read again in turn (so an edit made meanwhile is seen, not a stale hit)."""
    from npu_migrate.apply.cache import Cache
    from npu_migrate.commands.apply import _plan
    from npu_migrate.core.config import Settings
    from npu_migrate.apply.runner import run

    files = [str(p) for p in tree(tmp_path)]
    plan = _plan(Settings(), (), (), ())
    cache = Cache(str(tmp_path / "cache"), "key")
    cold = list(run(files, plan, 1, cache))
    stream = run(files, plan, 1, cache)
    assert next(stream).cached
    last_changed = max(i for i, r in enumerate(cold) if r.outcome.changed)
    Path(files[last_changed]).write_text(CUDA + "z = x.cuda()\n")
    rest = list(stream)
    edited = rest[last_changed - 1]
    assert not edited.cached
    assert len(edited.outcome.edits) == len(cold[last_changed].outcome.edits) + 1  # the new .cuda()
    assert "z = x.npu()" in edited.outcome.new_text
    assert all(r.cached for i, r in enumerate(rest) if i != last_changed - 1)
