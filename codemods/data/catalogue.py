"""The catalogue of CUDA-only knowledge (`cuda_only.json`): what the rules, the shared analyses,
`analyze`, the docs and the coverage page ask of it, in one place.

An entry says what a library, kernel language, engine, option value, environment toggle or
launch-script command is, where a use of it is found (`at`), its status per torch_npu release
(`works`, `npu-route`, `no-route`) and its route (the rewrite, or the exact advice). Adding a
library is a data change: a new entry (and a case in the rule that reports it).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from codemods.data.tables import load_data

TABLE = "cuda_only.json"
# the kinds of entry that are code running on the device (a guard in front of them selects them)
CODE_KINDS = frozenset({"library", "kernel-language", "engine", "monitoring", "extension"})

Entry = dict[str, Any]


@cache
def entries() -> tuple[Entry, ...]:
    return tuple(load_data(TABLE)["entries"])


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def status(entry: Entry, version: str | None = None, by: str = "status") -> str:
    """The entry's status on torch_npu `version` (the release its newest status holds from
    that is not after `version`; the newest status when `version` is None or older than all).
    `by="framework_status"`: on release `version` of the entry's framework (transformers runs
    `flash_attention_2` on NPU from 4.56); the torch_npu status where the entry has none."""
    table: dict[str, str] = entry.get(by) or entry["status"]
    steps = sorted(table.items(), key=lambda item: _release(item[0]))
    if version is not None:
        wanted = _release(version)
        reached = [value for since, value in steps if _release(since) <= wanted]
        if reached:
            return reached[-1]
        return steps[0][1]
    return steps[-1][1]


def is_cuda_only(entry: Entry, version: str | None = None) -> bool:
    """Whether the entry is code that does not run on the NPU as written."""
    return entry["kind"] in CODE_KINDS and status(entry, version) != "works"


def of_code(code: str) -> list[Entry]:
    """The entries a rule reports (its Python, launch-script or YAML-config code)."""
    return [e for e in entries() if code in (e.get("code"), e.get("shell_code"), e.get("config_code"))]


def found_at(where: str, code: str | None = None) -> list[Entry]:
    return [e for e in entries() if where in e["at"] and (code is None or e.get("code") == code)]


# -- modules -------------------------------------------------------------------------------------

@cache
def import_entries() -> tuple[Entry, ...]:
    """Entries reported at an import, longest module first (`apex.amp` before `apex`)."""
    return tuple(sorted(found_at("import"), key=lambda e: -len(e["cuda"])))


def best_import_entry(module: str) -> Entry | None:
    """The most specific entry naming `module` or a module above it."""
    return next((e for e in import_entries() if module == e["cuda"] or module.startswith(e["cuda"] + ".")), None)


@cache
def cuda_only_libraries() -> frozenset[str]:
    """The top modules of CUDA-only code that an import brings in (`apex`, `triton`, `cuda.bindings`,
    `numba.cuda`): the import entries of code kinds that do not run on NPU, without those under
    another (`apex.amp` is `apex`'s) and without torch's own names (`CUDA_HOME`, `CUDAExtension`
    are reported where used; importing them is harmless)."""
    names = {e["cuda"] for e in import_entries() if is_cuda_only(e) and not e["cuda"].startswith("torch.")}
    return frozenset(n for n in names if not any(n.startswith(other + ".") for other in names))


def cuda_only_library(module: str) -> str | None:
    """The CUDA-only library a dotted module name belongs to (`triton.language` -> `triton`)."""
    parts = module.split(".")
    libraries = cuda_only_libraries()
    return next((".".join(parts[:n]) for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in libraries), None)


def library_names() -> list[str]:
    """Every library display name of a code entry, for words in messages and docs."""
    return sorted({e["library"] for e in entries() if e["kind"] in CODE_KINDS and e.get("library")})


# -- option values -------------------------------------------------------------------------------

def option_entries(where: str = "option") -> list[Entry]:
    """Option entries as Python code (`option`), launch scripts (`flag`) or YAML configs (`config`) spell them."""
    if where == "option":
        return found_at("option")
    return [e for e in entries() if e.get({"flag": "flags", "config": "config_keys"}[where])]


def value_matches(entry: Entry, value: str) -> bool:
    """Whether an option value (as written, unquoted) triggers the entry."""
    if entry.get("values") is not None and value in entry["values"]:
        return True
    pattern = entry.get("pattern")
    return pattern is not None and re.fullmatch(pattern, value) is not None


def option_entry(name: str, value: str, where: str = "option") -> Entry | None:
    """The option entry for `name=value` (a keyword, a flag without its dashes, a config key)."""
    for entry in option_entries(where):
        keys = {"option": [entry.get("option")], "flag": entry.get("flags", ()),
                "config": entry.get("config_keys", ())}[where]
        if name in keys and value_matches(entry, value):
            return entry
    return None


def option_message(entry: Entry, name: str, value: str) -> str:
    """The entry's advice about `name=value` ({option}, {value}, {paged} filled in)."""
    paged = " that pages its state through CUDA unified memory" if value.startswith("paged_") else ""
    template: str = entry["message"]
    if name.startswith("-"):  # a launch-script flag: `--optim paged_adamw_32bit`
        return template.replace("`{option}={value}`", f"`{name} {value}`").format(
            option=name, value=value, paged=paged, name=name)
    return template.format(option=name, value=f'"{value}"', paged=paged, name=name)


def kept_because(entry: Entry, text: str) -> str | None:
    """Why the entry's rewrite does not apply in a file whose `text` sets one of its `kept_with`
    options true (`padding_free=True`, `packing: true`, `--packing True`, a bare `--packing`), or None."""
    names = entry.get("kept_with")
    if not names:
        return None
    spelled = "|".join(re.escape(name) for name in names)
    found = re.search(rf"""\b({spelled})["']?\s*(?:[=:]|\s)\s*["']?(?:True|true|yes|1)\b"""
                      rf"|--({spelled})(?=\s*(?:\\|--|$))", text, re.MULTILINE)
    if found is None:
        return None
    name = found.group(1) or found.group(2)
    return (f"kept: this file sets `{name}`, and `sdpa` would attend across the packed sequences; run it with "
            f"transformers 4.56 or newer, or turn `{name}` off and use `sdpa`")


def fix_note(entry: Entry) -> str:
    """` (unsafe fix)` for a rewrite the entry declares unsafe where its rules' rewrites are safe
    (ruff's per-fix applicability): the words an edit's message carries."""
    return " (unsafe fix)" if entry.get("fix") == "unsafe" else ""


def option_words(where: str) -> list[str]:
    """The names an option entry is spelled by in `where` (for prefilters)."""
    field = {"option": "option", "flag": "flags", "config": "config_keys"}[where]
    found: set[str] = set()
    for entry in option_entries(where):
        value = entry.get(field)
        found.update([value] if isinstance(value, str) else value or ())
    return sorted(found)


# -- packages, environment toggles, commands -------------------------------------------------------

@cache
def package_patterns() -> tuple[tuple[str, Entry], ...]:
    """(package name or glob, entry) of the requirements entries."""
    return tuple((name, entry) for entry in entries() if entry["kind"] == "packages" for name in entry.get("also", ()))


def package_entry(name: str) -> Entry | None:
    """The requirements entry for a package name (`flash_attn` == `flash-attn`; globs allowed)."""
    normal = name.lower().replace("_", "-")
    patterns = [(p.replace("_", "-"), e) for p, e in package_patterns()]
    exact = next((e for p, e in patterns if normal == p), None)
    return exact or next((e for p, e in patterns if fnmatch.fnmatchcase(normal, p)), None)


def env_toggles() -> list[Entry]:
    return [e for e in entries() if e["kind"] == "env"]


def commands() -> list[Entry]:
    return [e for e in entries() if e["kind"] == "command"]


def words(found: Iterable[str]) -> str:
    """A prefilter alternation of literal words."""
    return "|".join(re.escape(w) for w in sorted(set(found))) or r"(?!)"
