"""The analyzer's facts, loaded once from `data/`: operator catalog, NPU kernel list (op-plugin's
aten operators, shipped as `npu_aten_ops.tsv`), third-party CUDA code, distributed set-ups,
fusion patterns, DataLoader advice and the rating weights. A new torch_npu release is a data
change, never a code change."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
# sections of the kernel list whose operators run on the NPU; `custom` are torch_npu's own npu_* ops
KERNEL_SECTIONS = frozenset({"official", "symint", "quant", "autograd", "torch_npu-supported",
                             "torch_npu-symint"})


@cache
def load(name: str) -> Any:
    with open(DATA / f"{name}.json", encoding="utf-8") as handle:
        return json.load(handle)


@cache
def npu_kernels() -> tuple[frozenset[str], frozenset[str]]:
    """(aten operators with an NPU kernel, torch_npu custom operators), overloads stripped."""
    aten: set[str] = set()
    custom: set[str] = set()
    with open(DATA / "npu_aten_ops.tsv", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(("#", "section\t")) or not line.strip():
                continue
            section, overload = line.split("\t")[:2]
            base = overload.split(".")[0]
            if section in KERNEL_SECTIONS:
                aten.add(base)
            elif "custom" in section:
                custom.add(base)
    return frozenset(aten), frozenset(custom)


def kernel_status(aten_ops: list[str] | None) -> tuple[str, list[str]]:
    """('native', []) when every operator has an NPU kernel, ('cpu-fallback risk', missing) when
    some has none, ('unmapped', []) when the call's operators are not certain."""
    if not aten_ops:
        return "unmapped", []
    kernels, _ = npu_kernels()
    missing = [op for op in aten_ops if op not in kernels]
    return ("cpu-fallback risk", missing) if missing else ("native", [])


@cache
def operators() -> dict[str, dict[str, Any]]:
    return load("operators")["callables"]


@cache
def third_party_modules() -> list[tuple[str, dict[str, Any]]]:
    """Import-prefix entries, longest prefix first (apex.amp before apex)."""
    entries = [(e["cuda"], e) for e in load("third_party")["entries"] if e["match"] == "module"]
    return sorted(entries, key=lambda item: -len(item[0]))


@cache
def third_party_calls() -> dict[str, dict[str, Any]]:
    return {e["cuda"]: e for e in load("third_party")["entries"] if e["match"] == "call"}


def third_party_file_entry() -> dict[str, Any]:
    return next(e for e in load("third_party")["entries"] if e["match"] == "file")


@cache
def distributed_calls() -> dict[str, dict[str, Any]]:
    return {call: setup for setup in load("distributed")["setups"] for call in setup["calls"]}


@cache
def distributed_modules() -> list[tuple[str, dict[str, Any]]]:
    found = [(m, s) for s in load("distributed")["setups"] for m in s["modules"]]
    return sorted(found, key=lambda item: -len(item[0]))


@cache
def collectives() -> frozenset[str]:
    return frozenset(load("distributed")["collectives"])


def match_prefix(module: str, table: list[tuple[str, Any]]) -> Any:
    for prefix, value in table:
        if module == prefix or module.startswith(prefix + "."):
            return value
    return None
