"""`[tool.npu-migrate]` in pyproject.toml, found by walking up from the paths given (as ruff
does). Command-line options override it. Unknown keys and bad values are errors naming the key."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

SECTION = "npu-migrate"
# accepted spellings of amp-dtype -> the dtype the AMP rule inserts
AMP_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
              "half": "float16"}


class ConfigError(ValueError):
    """A bad configuration; the message names the file and the key."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    enable: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    amp_dtype: str = "bfloat16"
    target_version: str | None = None  # the torch_npu release the migrated code must run on
    snapshot_env: str | None = None  # NPU420: the variable that switches memory recording on
    snapshot_max_entries: int | None = None  # NPU420: the recorder's ring-buffer size
    jobs: int | None = None
    cache_dir: str | None = None
    respect_gitignore: bool = True
    source: str | None = None  # the pyproject.toml it came from
    root: str = "."  # its folder: relative paths in the config are relative to it

    def rule_options(self) -> dict[str, Any]:
        return {"amp_dtype": self.amp_dtype, "target_version": self.target_version,
                "snapshot_env": self.snapshot_env, "snapshot_max_entries": self.snapshot_max_entries}


def _key(name: str) -> str:
    return name.replace("_", "-")


_LIST_KEYS = {"select", "ignore", "enable", "exclude"}
_KNOWN = {_key(f.name) for f in fields(Settings)} - {"source", "root"}


def find_pyproject(paths: Iterable[str]) -> str | None:
    """The nearest pyproject.toml with a [tool.npu-migrate] table, from the common folder of the
    paths upwards."""
    starts = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    start = os.path.commonpath(starts) if len(starts) > 1 else starts[0]
    directory = start if os.path.isdir(start) else os.path.dirname(start)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate) and _has_section(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _has_section(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    try:
        tool = tomllib.loads(data.decode("utf-8")).get("tool", {})
        return isinstance(tool, dict) and SECTION in tool
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        # a broken unrelated pyproject is not ours to judge; a broken one of ours must not be
        # skipped silently (the run would go on with other settings)
        if f"tool.{SECTION}".encode() in data or f'tool."{SECTION}"'.encode() in data:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        return False


def load_settings(paths: Sequence[str], config_file: str | None = None,
                  isolated: bool = False) -> Settings:
    if isolated:
        return Settings()
    path = config_file or find_pyproject(paths)
    if path is None:
        return Settings()
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get(SECTION, {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{SECTION}] must be a table")
    settings = parse_table(table, path)
    settings.source = path
    settings.root = os.path.dirname(os.path.abspath(path))
    if settings.cache_dir is not None:  # relative to the config file, not to where we run
        settings.cache_dir = os.path.join(settings.root, os.path.expanduser(settings.cache_dir))
    resolve_selectors_and_globs(settings, path)
    return settings


def resolve_selectors_and_globs(settings: Settings, path: str) -> None:
    """Every code, prefix or name in the config must match a rule (built-in or plugin);
    per-file-ignores names are turned into codes, which is what the runner matches; globs lose
    a leading `./`."""
    from codemods.framework.registry import _matches, all_rules

    where = f"{path}: [tool.{SECTION}]"
    rules = all_rules()
    by_name = {r.name: r.code for r in rules}

    def check(key: str, selector: str) -> None:
        if not any(_matches(rule, selector) for rule in rules):
            close = difflib.get_close_matches(selector, [r.code for r in rules] + list(by_name), 1)
            hint = f"; did you mean {close[0]!r}?" if close else " (see `npu-migrate rules`)"
            raise ConfigError(f"{where}: {key}: unknown rule code or name {selector!r}{hint}")

    for key in ("select", "ignore", "enable"):
        for selector in getattr(settings, key):
            check(key, selector)
    resolved: dict[str, list[str]] = {}
    for pattern, codes in settings.per_file_ignores.items():
        for selector in codes:
            check(f"per-file-ignores.{pattern!r}", selector)
        # ALL becomes the empty prefix, which the runner's prefix match reads as every code
        resolved[_normal_glob(pattern)] = ["" if c.strip().upper() == "ALL"
                             else by_name.get(c.strip().lower(), c.strip().upper()) for c in codes]
    settings.per_file_ignores = resolved
    settings.exclude = [_normal_glob(p) for p in settings.exclude]


def _normal_glob(pattern: str) -> str:
    """`./tests/*` means `tests/*`: paths are matched without a leading `./`."""
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern


def parse_table(table: dict[str, Any], path: str = "pyproject.toml") -> Settings:
    settings = Settings()
    where = f"{path}: [tool.{SECTION}]"
    for key, value in table.items():
        if key not in _KNOWN:
            close = difflib.get_close_matches(key, sorted(_KNOWN), 1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{where}: unknown key {key!r} ({hint}known: {', '.join(sorted(_KNOWN))})")
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
        elif key == "target-version":
            if not (isinstance(value, str) and re.fullmatch(r"\d+\.\d+(\.\d+)?(\S*)", value)):
                raise ConfigError(f"{where}: target-version must be a torch_npu version such as '2.9.0'")
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
        elif key == "respect-gitignore":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: respect-gitignore must be true or false")
        setattr(settings, attr, value)
    return settings
