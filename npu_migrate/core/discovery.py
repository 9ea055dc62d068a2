"""Which files a run looks at: Python (and shell) files under the given paths, honouring
`.gitignore` inside a git work tree, skipping VCS, virtual-environment, build and cache folders,
and `--exclude` globs."""

from __future__ import annotations

import fnmatch
import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from npu_migrate.core.sources import is_temp_name

if TYPE_CHECKING:
    import pathspec

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
    return name in SKIP_DIRS or name.endswith(".egg-info") or is_temp_name(name)


def _skipped_dir(path: str) -> bool:
    return _skipped_name(os.path.basename(path)) or os.path.exists(os.path.join(path, "pyvenv.cfg"))


def excluded(path: str, patterns: Sequence[str], is_dir: bool = False) -> bool:
    """Whether the relative `path` matches the exclude globs, read as .gitignore reads its lines
    (pathspec's GitIgnoreSpec): a name without a slash matches at any depth, a pattern with one
    is anchored to the folder the path is relative to, `*` stays within a folder and `**` does
    not, a trailing `/` matches folders only (and what they hold), `!` re-includes."""
    if not patterns:
        return False
    normalised = path.replace(os.sep, "/").removeprefix("./")
    return _gitignore(tuple(patterns)).match_file(normalised + ("/" if is_dir else ""))


@functools.lru_cache(maxsize=256)
def _gitignore(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    import pathspec  # here: most runs have no exclude glob

    return pathspec.GitIgnoreSpec.from_lines(patterns)


def absolute_glob(pattern: str) -> bool:
    """An absolute path (`/home/me/proj/legacy/*`) rather than a .gitignore line anchored by its
    leading `/` (`/legacy`): it starts with an existing folder of the file system's root."""
    parts = pattern.split("/")
    return pattern.startswith("/") and len(parts) > 2 and os.path.isdir("/" + parts[1])


def _git_files(directory: str) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files under `directory`, or None outside git; those of
    an untracked repository nested inside (which git lists as one `name/` entry) as its own git
    lists them."""
    try:
        result = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            cwd=directory, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    files = []
    for name in filter(None, result.stdout.decode("utf-8", "surrogateescape").split("\0")):
        path = os.path.normpath(os.path.join(directory, name))
        if name.endswith("/"):  # a repository of its own inside this one (projects cloned side by side)
            if not _skipped_dir(path):
                files += _git_files(path) or list(_walk(path))
        else:
            files.append(path)
    return files


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
    relative_patterns = [p for p in patterns if not absolute_glob(p)]
    if any(excluded(view, relative_patterns) for view in views):
        return True
    absolute_patterns = [p for p in patterns if absolute_glob(p)]
    return bool(absolute_patterns) and excluded(absolute.lstrip("/"), [p.lstrip("/") for p in absolute_patterns])


SHELL_INTERPRETERS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh"})


def interpreter_of(first_line: str) -> str | None:
    """The program a `#!` line runs: `bash` for `#!/usr/bin/env bash`, `python3` for
    `#!/usr/bin/env -S python3 -u`; None without a `#!` line."""
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].split()
    if words and os.path.basename(words[0]) == "env":  # env's options and VAR=value come first
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return os.path.basename(words[0]) if words else None


def script_language(first_line: str) -> str | None:
    """A script's language by its `#!` line: "python", "shell" or "other"; None without one."""
    program = interpreter_of(first_line)
    if program is None:
        return None
    if program.startswith("python"):
        return "python"
    return "shell" if program in SHELL_INTERPRETERS else "other"


def discover(paths: Iterable[str], exclude: Sequence[str] = (),
             suffixes: Sequence[str] = PYTHON_SUFFIXES, respect_gitignore: bool = True,
             root: str | None = None) -> list[str]:
    """Sorted, de-duplicated files. A file named explicitly is taken whatever its suffix, unless
    excluded (the engine reads it by its suffix, or by its `#!` line); folders are searched for
    `suffixes`. `root` is the config folder: exclude globs may be relative to it."""
    found: dict[str, None] = {}
    roots = [os.getcwd()] + ([os.path.abspath(root)] if root else [])
    for path in paths:
        if os.path.lexists(path) and not os.path.isdir(path):
            # a FIFO, device or link named explicitly is taken too: the run skips it with a note
            if not _is_excluded(path, exclude, roots):
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


def copy_for_output(paths: Sequence[str], output_dir: str) -> dict[str, str]:
    """`--output-dir`: copy the inputs into `output_dir` (folders whole, minus what `copy_ignore`
    leaves out; symbolic links of the sources copied as links) and map each source file to its
    copy. A symbolic link already in the output folder where a copy goes is removed, never
    followed: a link planted there (`out/a.py -> ~/.bashrc`) must not get the copy written
    through it. The folder named by `--output-dir` itself is the user's choice, link or not."""
    os.makedirs(output_dir, exist_ok=True)
    targets: dict[str, str] = {}
    for path in paths:
        name = os.path.basename(os.path.normpath(os.path.abspath(path)))
        destination = output_dir if len(paths) == 1 and os.path.isdir(path) else os.path.join(output_dir, name)
        if os.path.isdir(path):
            _copy_folder(path, destination, targets)
        else:
            _copy_entry(path, destination)
            targets[os.path.normpath(path)] = destination
    return targets


def _copy_folder(source: str, destination: str, targets: dict[str, str]) -> None:
    for root, dirs, files in os.walk(source):  # top-down: a folder is made before what it holds
        left_out = copy_ignore(root, dirs + files)
        dirs[:] = [d for d in dirs if d not in left_out]
        target_root = os.path.normpath(os.path.join(destination, os.path.relpath(root, source)))
        if os.path.islink(target_root):
            os.unlink(target_root)
        os.makedirs(target_root, exist_ok=True)
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):  # os.walk lists it but does not enter it
                _copy_entry(os.path.join(root, name), os.path.join(target_root, name))
        for name in files:
            if name not in left_out:
                _copy_entry(os.path.join(root, name), os.path.join(target_root, name))
                targets[os.path.normpath(os.path.join(root, name))] = os.path.join(target_root, name)


def _copy_entry(source: str, target: str) -> None:
    """A file (mode and times kept) or a symbolic link (as a link) at `target`, replacing what is
    there (a stale copy, which may be read-only, or a link) without following it."""
    if os.path.islink(target) or os.path.isfile(target):
        os.unlink(target)
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)
    else:
        shutil.copy2(source, target)

