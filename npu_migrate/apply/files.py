"""Which files a run reads, and how.

- The one reader every read of a run goes through, the migration's and the project facts' alike
  (`read_bounded`): regular files only (a FIFO is never opened for a blocking read, a symbolic
  link never followed), and never past the per-file size limit.
- The files a run looks at (`gather`): discovery of the paths given, each file with its own
  settings, kept when a selected rule reads its kind; JSON files only when they are DeepSpeed
  configurations (named on the command line, named like one, matched by `deepspeed-configs`, or
  chosen by a project fact: the code of their package root passes them to DeepSpeed).
- What `--changed-since` and `--shard` keep (`narrow`), and the copy `--output-dir` makes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from npu_migrate.core.config import Settings, SettingsFinder
from npu_migrate.core.discovery import (
    CUDA_SUFFIXES,
    JSON_SUFFIXES,
    MANIFEST_SUFFIXES,
    PYTHON_SUFFIXES,
    SHELL_SUFFIXES,
    deepspeed_config_name,
    discover,
    excluded,
    manifest_name,
)
from npu_migrate.core.notebooks import NOTEBOOK_SUFFIX
from npu_migrate.core.sources import Skipped, read_regular

# LibCST needs about 350 bytes of memory and, for code dense in CUDA uses, up to 50 us of CPU
# per byte it parses: a file above this size is an error (left untouched), not an hour-long run
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_FILE_BYTES_VARIABLE = "NPU_MIGRATE_MAX_FILE_BYTES"
# notebooks carry their outputs (images, tables): only the code cells reach LibCST (issue 14)
NOTEBOOK_LIMIT_FACTOR = 16
ALL_SUFFIXES = (PYTHON_SUFFIXES + (NOTEBOOK_SUFFIX,) + SHELL_SUFFIXES + CUDA_SUFFIXES + JSON_SUFFIXES
                + MANIFEST_SUFFIXES)


def default_max_file_bytes() -> int:
    """`MAX_FILE_BYTES`, or the environment's `NPU_MIGRATE_MAX_FILE_BYTES` (0: no limit)."""
    value = os.environ.get(MAX_FILE_BYTES_VARIABLE, "").strip()
    return int(value) if value.isdigit() else MAX_FILE_BYTES


class TooBig(Exception):
    """A file over the per-file size limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(size, limit)
        self.size, self.limit = size, limit


def read_bounded(path: str, limit: int = 0) -> bytes:
    """The bytes of the regular file `path`, if it is no larger than `limit` (0: no limit; a
    notebook may be `NOTEBOOK_LIMIT_FACTOR` times larger: its outputs are read as JSON, never
    parsed as code). Raises `TooBig`, `sources.Skipped` (not a regular file: a link, a FIFO, a
    device) or OSError."""
    if limit and path.endswith(NOTEBOOK_SUFFIX):
        limit *= NOTEBOOK_LIMIT_FACTOR
    if limit and (size := os.lstat(path).st_size) > limit:
        raise TooBig(size, limit)
    return read_regular(path)


def read_error(path: str, problem: TooBig | OSError) -> str:
    """The one line a run prints for a file it could not read."""
    if isinstance(problem, TooBig):
        return (f"{path}:0:0: {problem.size / 2**20:.1f} MiB is over the per-file limit of "
                f"{problem.limit / 2**20:.1f} MiB; left untouched (raise it with {MAX_FILE_BYTES_VARIABLE}=<bytes>)")
    return f"{path}:0:0: cannot read: {problem.strerror}"


def read_or_none(path: str, limit: int) -> bytes | None:
    """`read_bounded`, or None for a file it refuses (what the project facts read: a file the
    run cannot migrate says nothing about its neighbours either)."""
    try:
        return read_bounded(path, limit)
    except (TooBig, Skipped, OSError):
        return None


@dataclass
class Gathered:
    """The files a run may read, each with its settings, in order; among them the ones only a
    project fact can choose (`undecided`: JSON files no name or glob made DeepSpeed configurations);
    and every file discovery found (what the project facts of files under no configuration read:
    a launch script passes a JSON file to DeepSpeed whether or not a shell rule is selected)."""

    files: list[tuple[str, Settings]] = field(default_factory=list)
    undecided: set[str] = field(default_factory=set)
    discovered: list[tuple[str, Settings]] = field(default_factory=list)


def gather(paths: Sequence[str], finder: SettingsFinder, exclude: Sequence[str],
           suffixes_of: Callable[[Settings], tuple[str, ...]],
           choosers_of: Callable[[Settings], tuple[str, ...]]) -> Gathered:
    """Each file with its own settings. Which files a folder yields depends only on the command
    line and on each file's own configuration, never on the other paths given. `suffixes_of`
    gives what a configuration's rules read, `choosers_of` the suffixes its project facts choose
    among."""
    found: dict[str, None] = {}
    for path in paths:
        governing = finder.for_path(path)
        for file in discover([path], list(exclude), ALL_SUFFIXES, governing.respect_gitignore,
                             root=governing.root if governing.source else None):
            found[file] = None
    explicit = {os.path.normpath(p) for p in paths if os.path.isfile(p)}
    gathered = Gathered()
    for file in sorted(found):
        settings = finder.for_path(file)
        gathered.discovered.append((file, settings))
        if file.endswith(JSON_SUFFIXES) and not _named_deepspeed_config(file, explicit, settings):
            if not file.endswith(choosers_of(settings)):
                continue  # only DeepSpeed configurations among JSON files (NPU540)
            gathered.undecided.add(file)
        if file.endswith(".txt") and file not in explicit and not manifest_name(file):
            continue  # only requirements files among .txt (NPU315); other YAML files are configs (NPU541)
        if settings.exclude and not discover([file], settings.exclude, root=settings.root):
            continue  # excluded by its own configuration
        if file not in explicit and not file.endswith(suffixes_of(settings)):
            gathered.undecided.discard(file)
            continue  # no selected rule reads this kind of file
        gathered.files.append((file, settings))
    return gathered


def _named_deepspeed_config(file: str, explicit: set[str], settings: Settings) -> bool:
    """A JSON file named on the command line, named like a DeepSpeed configuration, or matched by
    the configuration's `deepspeed-configs` globs."""
    return file in explicit or deepspeed_config_name(file) or bool(
        settings.deepspeed_configs
        and excluded(os.path.relpath(os.path.abspath(file), settings.root), settings.deepspeed_configs))
