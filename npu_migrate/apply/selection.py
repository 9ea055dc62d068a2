"""Narrowing the rule set (the configuration's selectors, checked against the rules) and the
file set (`--changed-since REV` and `--shard K/N`)."""

from __future__ import annotations

import heapq
import os
import subprocess
import zlib
from collections.abc import Sequence

from codemods.api.selectors import Selectable, selector_matches
from npu_migrate.core.config import SECTION, ConfigError, Settings, did_you_mean, normal_glob
from npu_migrate.core.diagnostics import shown


class SelectionError(ValueError):
    pass


def resolve_rule_selectors(settings: Settings, rules: Sequence[Selectable] | None = None) -> Settings:
    """Every code, prefix or name in a loaded configuration must match a rule (built-in or
    plugin; `rules`, or every installed one); per-file-ignores names are turned into codes, which
    is what the runner matches, and their globs lose a leading `./`. Raises ConfigError naming
    the file and the key."""
    if settings.source is None:  # defaults: nothing to check
        return settings
    if rules is None:
        from codemods.api.registry import all_rules

        rules = all_rules()
    where = f"{settings.source}: [tool.{SECTION}]"
    by_name = {r.name: r.code for r in rules}

    def check(key: str, selector: str) -> None:
        if not any(selector_matches(rule, selector) for rule in rules):
            close = did_you_mean(selector, [r.code for r in rules] + list(by_name))  # edit distance
            hint = f"; did you mean {close!r}?" if close else " (see `npu-migrate rules`)"
            raise ConfigError(f"{where}: {key}: unknown rule code or name {shown(selector)}{hint}")

    for key in ("select", "ignore", "enable"):
        for selector in getattr(settings, key):
            check(key, selector)
    resolved: dict[str, list[str]] = {}
    for pattern, codes in settings.per_file_ignores.items():
        for selector in codes:
            check(f"per-file-ignores.{pattern!r}", selector)
        # ALL becomes the empty prefix, which the runner's prefix match reads as every code
        resolved[normal_glob(pattern)] = ["" if c.strip().upper() == "ALL"
                                          else by_name.get(c.strip().lower(), c.strip().upper())
                                          for c in codes]
    settings.per_file_ignores = resolved
    return settings


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
    return [path for path in files if _hash(shard_key(path, root)) % n == k - 1]


def shard_by_group(items: Sequence[tuple[str, str]], k: int, n: int) -> list[bool]:
    """Which of `items` ((group key, item key): a package root and a file, as paths relative to
    where the run names them from) fall in shard K of N. A group stays together unless it is
    larger than 1.5 shares (a share: a shard's part of the items); a larger one (a run of one big
    project) is cut into about share-sized pieces by the hash of each item's key. Groups and
    pieces are then packed, largest first, each into the shard holding fewest items so far (ties:
    the lower shard). The same on every machine for the same items, whatever the order they come
    in; the shards partition them."""
    groups: dict[tuple[str, int], list[int]] = {}
    sizes: dict[str, int] = {}
    for group, _ in items:
        sizes[group] = sizes.get(group, 0) + 1
    share = max(1, -(-len(items) // n))
    for index, (group, key) in enumerate(items):
        pieces = max(1, round(sizes[group] / share))
        groups.setdefault((group, _hash(key) % pieces if pieces > 1 else 0), []).append(index)
    where = [0] * len(items)
    loads = [(0, s) for s in range(n)]  # a heap: (files so far, shard)
    for piece in sorted(groups, key=lambda g: (-len(groups[g]), g)):
        load, chosen = heapq.heappop(loads)
        heapq.heappush(loads, (load + len(groups[piece]), chosen))
        for index in groups[piece]:
            where[index] = chosen
    return [w == k - 1 for w in where]


def shard_key(path: str, root: str) -> str:
    """A path as sharding sees it: relative to `root` (the configuration's folder, or the working
    folder), with `/` between its parts."""
    return relative_key(os.path.abspath(path), os.path.abspath(root))


def relative_key(absolute: str, base: str) -> str:
    """`shard_key` of an absolute path against an absolute folder (cheap for the paths below it)."""
    prefix = os.path.join(base, "")
    relative = absolute[len(prefix):] if absolute.startswith(prefix) else os.path.relpath(absolute, base)
    return (relative or ".").replace(os.sep, "/")


def _hash(key: str) -> int:
    return zlib.crc32(key.encode("utf-8", "surrogateescape"))


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
