"""Which files a run looks at: Python (and shell) files under the given paths, honouring
`.gitignore` inside a git work tree, skipping VCS, virtual-environment, build and cache folders,
and `--exclude` globs."""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Iterable, Sequence

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "__pycache__", ".venv", "venv", ".env", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".eggs", "build", "dist",
    "node_modules", "site-packages", ".ipynb_checkpoints", ".npu-migrate-cache",
})
PYTHON_SUFFIXES = (".py",)
SHELL_SUFFIXES = (".sh", ".bash")


def _skipped_dir(path: str) -> bool:
    name = os.path.basename(path)
    return (name in SKIP_DIRS or name.endswith(".egg-info")
            or os.path.exists(os.path.join(path, "pyvenv.cfg")))


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """A glob matches the whole relative path or any of its components (like ruff's exclude)."""
    if not patterns:
        return False
    normalised = path.replace(os.sep, "/")
    if normalised.startswith("./"):
        normalised = normalised[2:]
    parts = normalised.split("/")
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(normalised, pattern) or any(fnmatch.fnmatch(p, pattern) for p in parts):
            return True
        if fnmatch.fnmatch(normalised, pattern + "/*"):
            return True
    return False


def _git_files(directory: str) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files under `directory`, or None outside git."""
    try:
        result = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            cwd=directory, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    names = [n for n in result.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    return [os.path.normpath(os.path.join(directory, n)) for n in names]


def _walk(directory: str) -> Iterable[str]:
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(os.path.join(root, d)))
        for name in sorted(files):
            yield os.path.join(root, name)


def discover(paths: Iterable[str], exclude: Sequence[str] = (),
             suffixes: Sequence[str] = PYTHON_SUFFIXES, respect_gitignore: bool = True) -> list[str]:
    """Sorted, de-duplicated files. A file named explicitly is taken whatever its suffix, unless
    excluded; folders are searched for `suffixes`."""
    found: dict[str, None] = {}
    for path in paths:
        if os.path.isfile(path):
            if not excluded(path, exclude):
                found[os.path.normpath(path)] = None
            continue
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no such file or directory")
        listed = _git_files(path) if respect_gitignore else None
        candidates = listed if listed is not None else _walk(path)
        for file in candidates:
            if not file.endswith(tuple(suffixes)):
                continue
            relative = os.path.relpath(file, path)
            if excluded(relative, exclude) or _in_skipped_dir(relative):
                continue
            if listed is not None and not os.path.isfile(file):
                continue  # deleted but still in the index
            found[file] = None
    return sorted(found)


def _in_skipped_dir(relative: str) -> bool:
    parts = relative.replace(os.sep, "/").split("/")[:-1]
    return any(p in SKIP_DIRS or p.endswith(".egg-info") for p in parts)
