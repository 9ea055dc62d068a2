"""Which files a run looks at: Python (and shell) files under the given paths, honouring
`.gitignore` inside a git work tree, skipping VCS, virtual-environment, build and cache folders,
and `--exclude` globs."""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
from collections.abc import Iterable, Sequence

from npu_migrate.core.sources import TEMP_PREFIX

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "__pycache__", ".venv", "venv", ".env", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".eggs", "build", "dist",
    "node_modules", "site-packages", ".ipynb_checkpoints", ".npu-migrate-cache",
})
PYTHON_SUFFIXES = (".py",)
SHELL_SUFFIXES = (".sh", ".bash")
CUDA_SUFFIXES = (".cu", ".cuh")
JSON_SUFFIXES = (".json",)
MANIFEST_SUFFIXES = (".txt", ".yml", ".yaml")
# YAML files that are not manifests are configs (Hydra, Hugging Face, Lightning): NPU541 reads them
CONFIG_SUFFIXES = (".yml", ".yaml")
# dependency manifests, by their name: pip requirements and conda environments (other .txt and
# YAML files are not read)
MANIFEST_NAMES = ("*requirements*.txt", "environment*.yml", "environment*.yaml", "conda*.yml", "conda*.yaml")
# JSON files that are DeepSpeed configurations by their name (others: by reference, issue 14)
DEEPSPEED_CONFIG_NAMES = ("ds_config*.json", "ds_*config*.json", "*deepspeed*.json")


def deepspeed_config_name(path: str) -> bool:
    """Whether a .json file is named like a DeepSpeed configuration."""
    name = os.path.basename(path).lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in DEEPSPEED_CONFIG_NAMES)


def manifest_name(path: str) -> bool:
    """Whether a file is named like a pip requirements file or a conda environment."""
    name = os.path.basename(path).lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in MANIFEST_NAMES)


def _skipped_name(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(".egg-info") or name.startswith(TEMP_PREFIX)


def _skipped_dir(path: str) -> bool:
    return _skipped_name(os.path.basename(path)) or os.path.exists(os.path.join(path, "pyvenv.cfg"))


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """A glob matches the whole relative path or any of its components (like ruff's exclude)."""
    if not patterns:
        return False
    normalised = path.replace(os.sep, "/")
    normalised = normalised.removeprefix("./")
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
            yield os.path.normpath(os.path.join(root, name))  # `a.py`, not `./a.py`


def _is_excluded(path: str, patterns: Sequence[str], roots: Sequence[str],
                 below_argument: str | None = None) -> bool:
    """Exclude globs are written relative to the folder given on the command line, to the
    project (config) root or to where the command runs; or absolute. Components above those
    folders never count (a checkout under /tmp/build/ is not excluded by `build`)."""
    if not patterns:
        return False
    views = [below_argument] if below_argument is not None else []
    if not os.path.isabs(path):
        views.append(path)
    absolute = os.path.abspath(path)
    for root in roots:
        relative = os.path.relpath(absolute, root)
        if not relative.startswith(os.pardir):
            views.append(relative)
    if any(excluded(view, patterns) for view in views):
        return True
    return any(os.path.isabs(p) and (fnmatch.fnmatch(absolute, p.rstrip("/"))
                                     or fnmatch.fnmatch(absolute, p.rstrip("/") + "/*"))
               for p in patterns)


def _foreign_script(path: str) -> bool:
    """An extension-less script whose shebang names another interpreter (a pre-commit `shell`
    file such as `run_train`): the engine would read it as Python and fail."""
    if path.endswith((".py", ".pyi", ".pyw") + SHELL_SUFFIXES):
        return False
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" not in first


def discover(paths: Iterable[str], exclude: Sequence[str] = (),
             suffixes: Sequence[str] = PYTHON_SUFFIXES, respect_gitignore: bool = True,
             root: str | None = None) -> list[str]:
    """Sorted, de-duplicated files. A file named explicitly is taken whatever its suffix (but
    not an extension-less script of another language), unless excluded; folders are searched
    for `suffixes`. `root` is the config folder: exclude globs may be relative to it."""
    found: dict[str, None] = {}
    roots = [os.getcwd()] + ([os.path.abspath(root)] if root else [])
    for path in paths:
        if os.path.lexists(path) and not os.path.isdir(path):
            # a FIFO, device or link named explicitly is taken too: the run skips it with a note
            regular = os.path.isfile(path) and not os.path.islink(path)
            if not _is_excluded(path, exclude, roots) and not (regular and _foreign_script(path)):
                found[os.path.normpath(path)] = None
            continue
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no such file or directory")
        listed = _git_files(path) if respect_gitignore else None
        if not listed:  # outside git, or a folder git ignores that was named explicitly
            listed = None
        candidates = listed if listed is not None else _walk(path)
        for file in candidates:
            if not file.endswith(tuple(suffixes)):
                continue
            relative = os.path.relpath(file, path)
            if _in_skipped_dir(relative) or _is_excluded(file, exclude, roots, relative):
                continue
            if listed is not None and not os.path.lexists(file):
                continue  # deleted but still in the index
            found[file] = None
    return sorted(found)


def _in_skipped_dir(relative: str) -> bool:
    parts = relative.replace(os.sep, "/").split("/")[:-1]
    return any(_skipped_name(p) for p in parts)


def output_dir_problem(paths: Iterable[str], output_dir: str) -> str | None:
    """Why `output_dir` cannot receive a migrated copy of `paths`: equal to or inside an input
    folder, the copy would copy itself into itself, deeper on every run."""
    out = os.path.realpath(output_dir)
    for path in paths:
        if os.path.isdir(path):
            root = os.path.realpath(path)
            if out == root or out.startswith(root.rstrip(os.sep) + os.sep):
                return (f"--output-dir {output_dir} is {'the input folder' if out == root else 'inside the input'} "
                        f"{path}: choose a folder outside it")
        elif os.path.dirname(os.path.realpath(path)) == out:  # the copy of a file would be the file
            return f"--output-dir {output_dir} is the folder of the input {path}: choose another folder"
    return None


def copy_ignore(directory: str, names: list[str]) -> set[str]:
    """For `shutil.copytree`: what a migrated copy leaves out. VCS, cache and environment
    folders, our temp folders, and anything but folders, regular files and links (copying
    a FIFO would block)."""
    left_out = set()
    for name in names:
        path = os.path.join(directory, name)
        if _skipped_name(name):
            left_out.add(name)
            continue
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            left_out.add(name)
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            left_out.add(name)
    return left_out
