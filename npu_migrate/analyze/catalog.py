"""The analyzer's facts, loaded once from `data/`: operator catalog, NPU kernel list (op-plugin's
aten operators: `npu_migrate.core.kernels`), distributed set-ups, fusion patterns, DataLoader
advice and the rating weights; third-party CUDA code comes from the rules' catalogue of CUDA-only
knowledge (`codemods/data/cuda_only.json`, its entries with an `effort` category), so `apply` and
`analyze` give the same advice. A new torch_npu release is a data change, never a code change."""

from __future__ import annotations

from functools import cache
from typing import Any

# the kernel list lives in core (the emulation reads it too); re-exported for the analyzer's modules
from npu_migrate.core.kernels import KERNEL_SECTIONS as KERNEL_SECTIONS
from npu_migrate.core.kernels import KERNEL_TABLE as KERNEL_TABLE
from npu_migrate.core.kernels import npu_kernels as npu_kernels
from npu_migrate.core.kernels import parse_version as parse_version
from npu_migrate.core.kernels import serves as serves
from npu_migrate.analyze.data_tables import TABLES
from codemods.data import catalogue


def load(name: str) -> dict[str, Any]:
    """The table `data/<name>.json`, checked against its schema (`data_tables.py`) on first use."""
    return TABLES.load(f"{name}.json")


def kernel_status(aten_ops: list[str] | None, version: str | None = None) -> tuple[str, list[str]]:
    """('native', []) when every operator has an NPU kernel (in `version`, when given),
    ('cpu-fallback risk', missing) when some has none, ('unmapped', []) when the call's
    operators are not certain."""
    if not aten_ops:
        return "unmapped", []
    kernels, _ = npu_kernels(version)
    missing = [op for op in aten_ops if op not in kernels]
    return ("cpu-fallback risk", missing) if missing else ("native", [])


@cache
def operators() -> dict[str, dict[str, Any]]:
    return load("operators")["callables"]


@cache
def third_party() -> dict[str, dict[str, Any]]:
    """The catalogue entries the effort model costs (those with an `effort` category), by name."""
    return {e["cuda"]: e for e in catalogue.entries() if e.get("effort")}


@cache
def third_party_modules() -> list[tuple[str, dict[str, Any]]]:
    """Import-prefix entries, longest prefix first (apex.amp before apex)."""
    entries = [(e["cuda"], e) for e in third_party().values() if "import" in e["at"]]
    return sorted(entries, key=lambda item: -len(item[0]))


@cache
def third_party_calls() -> dict[str, dict[str, Any]]:
    return {name: e for name, e in third_party().items() if "call" in e["at"]}


def third_party_file_entry() -> dict[str, Any]:
    return next(e for e in third_party().values() if e["code"] == "NPU312")


def kernel_language(decorator: str) -> dict[str, Any] | None:
    """The costed entry of the kernel language a decorator belongs to (`triton.jit`, `tilelang.jit`,
    `cutlass.cute.kernel`), or None."""
    entry = catalogue.best_import_entry(decorator)
    if entry is None or entry["kind"] != "kernel-language" or "reference" not in entry["at"]:
        return None
    library = catalogue.cuda_only_library(decorator)
    return third_party().get(library) if library else None


def route(entry: dict[str, Any]) -> str:
    """An entry's NPU route in one line: the counterpart, then the advice."""
    return (entry["npu"] + ": " if entry.get("npu") else "") + entry["message"]


@cache
def distributed_calls() -> dict[str, dict[str, Any]]:
    return {call: setup for setup in load("distributed")["setups"] for call in setup["calls"]}


@cache
def distributed_modules() -> list[tuple[str, dict[str, Any]]]:
    """Import prefixes, longest first; a `not_modules` prefix maps to None (not a set-up)."""
    found: list[tuple[str, Any]] = [(m, s) for s in load("distributed")["setups"] for m in s["modules"]]
    found += [(m, None) for s in load("distributed")["setups"] for m in s.get("not_modules", [])]
    return sorted(found, key=lambda item: -len(item[0]))


@cache
def collectives() -> frozenset[str]:
    return frozenset(load("distributed")["collectives"])


def match_prefix(module: str, table: list[tuple[str, Any]]) -> Any:
    for prefix, value in table:
        if module == prefix or module.startswith(prefix + "."):
            return value
    return None
