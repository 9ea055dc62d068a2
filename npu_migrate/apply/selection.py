"""Narrowing the file set: `--changed-since REV` and `--shard K/N`."""

from __future__ import annotations

import os
import subprocess
import zlib
from collections.abc import Sequence


class SelectionError(ValueError):
    pass


def parse_shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise SelectionError(f"--shard takes K/N with 1 <= K <= N, not {text!r}") from None
    if not 1 <= k <= n:
        raise SelectionError(f"--shard takes K/N with 1 <= K <= N, not {text!r}")
    return k, n


def shard(files: Sequence[str], k: int, n: int, root: str = ".") -> list[str]:
    """Files whose stable hash of their path (relative to `root`) falls in shard K of N.
    The same on every machine, and the shards partition the file set."""
    chosen = []
    for path in files:
        relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root)).replace(os.sep, "/")
        if zlib.crc32(relative.encode("utf-8", "surrogateescape")) % n == k - 1:
            chosen.append(path)
    return chosen


def changed_since(revision: str, paths: Sequence[str]) -> set[str]:
    """Absolute paths of files changed since `revision` (committed, staged, unstaged or new).
    Paths are built on the top folder as reached from the given paths (not git's resolved
    one), so they compare equal to `os.path.abspath` of discovered files through symlinks."""
    anchor = next((p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in paths), ".")

    def git(*args: str) -> str:
        try:
            result = subprocess.run(["git", *args], cwd=anchor or ".", capture_output=True, text=True,
                                    timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SelectionError(f"--changed-since needs git: {exc}") from None
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            raise SelectionError(f"--changed-since {revision}: {lines[-1] if lines else 'git failed'}")
        return result.stdout

    cdup = git("rev-parse", "--show-cdup").strip()
    top = os.path.normpath(os.path.join(os.path.abspath(anchor), cdup))
    try:
        git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except SelectionError:
        raise SelectionError(f"--changed-since {revision}: not a known git revision") from None
    names = git("-c", "core.quotePath=false", "diff", "--name-only", "--no-relative", "-z",
                "--diff-filter=ACMRT", revision, "--").split("\0")
    names += git("ls-files", "-z", "--others", "--exclude-standard", "--full-name", ":/").split("\0")
    return {os.path.normpath(os.path.join(top, name)) for name in names if name}
