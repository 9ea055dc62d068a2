"""Settings: `[tool.npu-migrate]` in pyproject.toml or the top level of `npu-migrate.toml`, the
nearest one to each file (as ruff does), optionally extending another file (`extend = "path"`).
Command-line options override it. Unknown keys and bad values are errors naming the key."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from npu_migrate.core.diagnostics import shown

SECTION = "npu-migrate"
# in one folder, npu-migrate.toml wins over pyproject.toml (ruff: ruff.toml over pyproject.toml)
CONFIG_NAMES = ("npu-migrate.toml", "pyproject.toml")
# accepted spellings of amp-dtype -> the dtype the AMP rule inserts
AMP_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
              "half": "float16"}


# what `apply` writes: torch_npu code, or device-generic code for CUDA, Ascend and CPU alike
TARGETS = ("npu", "portable")


class ConfigError(ValueError):
    """A bad configuration; the message names the file and the key."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    enable: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    deepspeed_configs: list[str] = field(default_factory=list)  # NPU540: more DeepSpeed .json globs
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    amp_dtype: str = "bfloat16"
    target: str = "npu"  # "npu": torch_npu code; "portable": device-generic code (docs/targets.md)
    target_version: str | None = None  # the oldest torch release the migrated code must run on
    snapshot_env: str | None = None  # NPU420: the variable that switches memory recording on
    snapshot_max_entries: int | None = None  # NPU420: the recorder's ring-buffer size
    jobs: int | None = None
    cache_dir: str | None = None
    respect_gitignore: bool = True
    source: str | None = None  # the pyproject.toml it came from
    root: str = "."  # its folder: relative paths in the config are relative to it

    def rule_options(self) -> dict[str, Any]:
        return {"amp_dtype": self.amp_dtype, "target": self.target, "target_version": self.target_version,
                "snapshot_env": self.snapshot_env, "snapshot_max_entries": self.snapshot_max_entries}


def _key(name: str) -> str:
    return name.replace("_", "-")


_LIST_KEYS = {"select", "ignore", "enable", "exclude", "deepspeed-configs"}
_KNOWN = {_key(f.name) for f in fields(Settings)} - {"source", "root"}


# -- did you mean ----------------------------------------------------------------------------
def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (insert, delete, substitute, swap two neighbours)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, char_b in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate nearest to `word` by edit distance (case-insensitive), if it is near
    enough to be a typo: at most a third of the word's length, and at least 1. Ties go to the
    first candidate in order. `NPU1O1` -> `NPU101` (one substitution), never `NPU311` (two).
    The distance is at least the difference in length, so a candidate whose length is too far
    off is never compared: a 100,000-character word costs no more than a short one."""
    word_key = word.strip().lower()
    limit = max(1, len(word_key) // 3)
    best, best_distance = None, limit + 1
    for candidate in candidates:
        if abs(len(candidate) - len(word_key)) >= best_distance:
            continue
        distance = edit_distance(word_key, candidate.lower())
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best


# -- reading and finding configuration files ---------------------------------------------------
def read_toml(path: str) -> dict[str, Any]:
    """A TOML file as a dict; a UTF-8 byte-order mark (as Windows editors write) is accepted."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return tomllib.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8: {exc.reason} at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise ConfigError(f"{path}: {TOO_DEEP}") from None


TOO_DEEP = "values nested too deeply to read (arrays or inline tables inside each other, thousands deep)"


def _table_of(path: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """Our settings table in a parsed file: all of npu-migrate.toml, or [tool.npu-migrate]."""
    if os.path.basename(path) != "pyproject.toml":
        return data
    tool = data.get("tool", {})
    if not isinstance(tool, dict) or SECTION not in tool:
        return None
    table = tool[SECTION]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{SECTION}] must be a table")
    return table


def config_in(directory: str) -> str | None:
    """The configuration file of this folder, if it has one: npu-migrate.toml, or a
    pyproject.toml with a [tool.npu-migrate] table."""
    for name in CONFIG_NAMES:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and (name != "pyproject.toml" or _has_section(candidate)):
            return candidate
    return None


def nearest_config(path: str) -> str | None:
    """The configuration that governs `path` (a file or folder): the nearest one in its folder
    or above."""
    absolute = os.path.abspath(path)
    directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
    while True:
        found = config_in(directory)
        if found is not None:
            return found
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def load_config_file(path: str) -> Settings:
    """Settings from one configuration file, following `extend` chains (the extending file's
    keys win; a cycle is an error). Relative paths are relative to the nearest file's folder,
    except `cache-dir`, which is relative to the file that sets it and must stay inside its
    folder (`project_cache_dir`).
    Rule selectors are checked against the installed rules by the caller (a layer up)."""
    table = _merged_table(os.path.abspath(path), [])
    settings = parse_table(table, path)
    settings.source = path
    settings.root = os.path.dirname(os.path.abspath(path))
    settings.exclude = [normal_glob(p) for p in settings.exclude]
    return settings


def _merged_table(path: str, chain: list[str]) -> dict[str, Any]:
    if path in chain:
        raise ConfigError(f"{chain[0]}: extend: a cycle ({' -> '.join(chain + [path])})")
    table = _table_of(path, read_toml(path))
    if table is None and chain:
        raise ConfigError(f"{path}: no [tool.{SECTION}] table (named by extend in {chain[-1]})")
    if table is None:
        return {}  # a pyproject.toml named by --config without our table: the defaults
    table = dict(table)
    if isinstance(table.get("cache-dir"), str):
        table["cache-dir"] = project_cache_dir(table["cache-dir"], path)
    base = table.pop("extend", None)
    if base is None:
        return table
    if not isinstance(base, str):
        raise ConfigError(f"{path}: [tool.{SECTION}]: extend must be a path (a string)")
    target = os.path.join(os.path.dirname(path), os.path.expanduser(base))
    if not os.path.isfile(target):
        raise ConfigError(f"{path}: extend: {base!r} is not a file")
    merged = _merged_table(os.path.abspath(target), chain + [path])
    merged.update(table)
    return merged


def project_cache_dir(value: str, config: str) -> str:
    """A configuration's `cache-dir`, absolute: relative to the file that sets it, and inside that
    file's folder (symbolic links resolved). A project's configuration arrives with the project
    (a clone, a pull request): it must not make `apply` create and fill a folder elsewhere on the
    disk. `--cache-dir` on the command line, the user's own choice, may name any folder."""
    folder = os.path.dirname(os.path.abspath(config))
    absolute = os.path.normpath(os.path.join(folder, os.path.expanduser(value)))
    real, real_folder = os.path.realpath(absolute), os.path.realpath(folder)
    if real != real_folder and not real.startswith(real_folder.rstrip(os.sep) + os.sep):
        raise ConfigError(f"{config}: [tool.{SECTION}]: cache-dir {shown(value)} is outside the project "
                          f"({folder}); a configuration keeps its cache inside its folder: give "
                          "--cache-dir on the command line for a folder elsewhere")
    return absolute


class SettingsFinder:
    """Settings per file, as ruff resolves them: `--isolated` gives the defaults, `--config`
    one file for everything, otherwise the nearest configuration to each file. Each folder is
    looked up once and each configuration file read once per run."""

    def __init__(self, config_file: str | None = None, isolated: bool = False) -> None:
        self.fixed = Settings() if isolated else load_config_file(config_file) if config_file else None
        self._by_config: dict[str | None, Settings] = {}
        self._by_folder: dict[str, str | None] = {}

    def for_path(self, path: str) -> Settings:
        if self.fixed is not None:
            return self.fixed
        absolute = os.path.abspath(path)
        folder = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        if folder not in self._by_folder:
            self._by_folder[folder] = nearest_config(folder)
        config = self._by_folder[folder]
        if config not in self._by_config:
            self._by_config[config] = Settings() if config is None else load_config_file(config)
        return self._by_config[config]


def show_settings(settings: Settings) -> str:
    """`--show-settings`: where the settings come from and every key's resolved value."""
    lines = [f"Settings path: {settings.source or '(none: defaults)'}", f"root = {settings.root!r}"]
    for item in fields(Settings):
        if item.name not in ("source", "root"):
            lines.append(f"{_key(item.name)} = {getattr(settings, item.name)!r}")
    return "\n".join(lines)


def find_pyproject(paths: Iterable[str]) -> str | None:
    """The nearest configuration file (npu-migrate.toml, or pyproject.toml with a
    [tool.npu-migrate] table), from the common folder of the paths upwards."""
    starts = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    start = os.path.commonpath(starts) if len(starts) > 1 else starts[0]
    return nearest_config(start)


def _has_section(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    try:
        tool = tomllib.loads(data.decode("utf-8-sig")).get("tool", {})
        return isinstance(tool, dict) and SECTION in tool
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        # a broken unrelated pyproject is not ours to judge; a broken one of ours must not be
        # skipped silently (the run would go on with other settings)
        if f"tool.{SECTION}".encode() in data or f'tool."{SECTION}"'.encode() in data:
            problem = TOO_DEEP if isinstance(exc, RecursionError) else f"invalid TOML: {exc}"
            raise ConfigError(f"{path}: {problem}") from None
        return False


def load_settings(paths: Sequence[str], config_file: str | None = None,
                  isolated: bool = False) -> Settings:
    """The settings of the configuration that governs `paths` as a whole (or `config_file`): one
    Settings for a run (analyze; apply resolves per file with SettingsFinder); defaults when
    there is none or `isolated`. Raises ConfigError naming the file for a bad table. Rule
    selectors are not checked here: `npu_migrate.apply.selection.resolve_rule_selectors` does."""
    if isolated:
        return Settings()
    path = config_file or find_pyproject(paths)
    if path is None:
        return Settings()
    return load_config_file(path)


def normal_glob(pattern: str) -> str:
    """`./tests/*` means `tests/*`: paths are matched without a leading `./`."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern


def parse_table(table: dict[str, Any], path: str = "pyproject.toml") -> Settings:
    settings = Settings()
    where = f"{path}: [tool.{SECTION}]"
    for key, value in table.items():
        if key not in _KNOWN:
            close = did_you_mean(key, sorted(_KNOWN))
            hint = f"did you mean {close!r}? " if close else ""
            raise ConfigError(f"{where}: unknown key {shown(key)} ({hint}known: {', '.join(sorted(_KNOWN))})")
        attr = key.replace("-", "_")
        if key in _LIST_KEYS:
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{where}: {key} must be a list of strings")
        elif key == "per-file-ignores":
            if not (isinstance(value, dict) and all(
                    isinstance(v, list) and all(isinstance(c, str) for c in v) for v in value.values())):
                raise ConfigError(f"{where}: per-file-ignores must map globs to lists of codes")
        elif key == "amp-dtype":
            if not isinstance(value, str) or value.lower() not in AMP_DTYPES:
                raise ConfigError(f"{where}: amp-dtype must be one of {', '.join(AMP_DTYPES)}, not {value!r}")
            value = AMP_DTYPES[value.lower()]
        elif key == "target":
            if value not in TARGETS:
                raise ConfigError(f"{where}: target must be one of {', '.join(TARGETS)}, not {value!r}")
        elif key == "target-version":
            if not (isinstance(value, str) and re.fullmatch(r"\d+\.\d+(\.\d+)?(\S*)", value)):
                raise ConfigError(f"{where}: target-version must be a torch version such as '2.6'")
        elif key == "snapshot-env":
            if not (isinstance(value, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value)):
                raise ConfigError(f"{where}: snapshot-env must be an environment variable name")
        elif key == "snapshot-max-entries":
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ConfigError(f"{where}: snapshot-max-entries must be a positive integer")
        elif key == "jobs":
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ConfigError(f"{where}: jobs must be a positive integer")
        elif key == "cache-dir":
            if not isinstance(value, str):
                raise ConfigError(f"{where}: cache-dir must be a string")
        elif key == "respect-gitignore" and not isinstance(value, bool):
            raise ConfigError(f"{where}: respect-gitignore must be true or false")
        setattr(settings, attr, value)
    return settings
