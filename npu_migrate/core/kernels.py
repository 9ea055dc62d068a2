"""The NPU kernel list: the aten operators torch_npu registers NPU kernels for (op-plugin's
`op_plugin_functions.yaml` and torch_npu's `npu_native_functions.yaml`), shipped as
`data/npu_aten_ops.tsv` with the torch_npu versions each kernel serves. The analyzer checks calls
against it before a run; the emulation checks the operators a run reaches."""

from __future__ import annotations

from functools import cache
from pathlib import Path

KERNEL_TABLE = Path(__file__).resolve().parent / "data" / "npu_aten_ops.tsv"
# sections of the kernel list whose operators run on the NPU; `custom` are torch_npu's own npu_* ops
KERNEL_SECTIONS = frozenset({"official", "symint", "quant", "autograd", "torch_npu-supported",
                             "torch_npu-symint"})


def parse_version(text: str) -> tuple[int, int]:
    """'2.6', '2.6.0', 'v2.6', '2.6.0.post3' -> (2, 6). Raises ValueError for anything else."""
    parts = text.strip().lstrip("v").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"not a torch_npu version: {text!r} (expected e.g. 2.6 or 2.6.0)")
    return int(parts[0]), int(parts[1])


def serves(ranges: str, version: tuple[int, int]) -> bool:
    """Whether a kernel-list field (`all_version`, `v2.1-newest`, `v2.1-v2.12`, `v2.1, v2.2`)
    covers a torch / torch_npu version (they move in step: torch_npu 2.6 runs on torch 2.6)."""
    for token in (t.strip() for t in ranges.split(",")):
        if token == "all_version":
            return True
        if not token:
            continue
        low, _, high = token.partition("-")
        if parse_version(low) <= version and (high == "newest" or version <= parse_version(high or low)):
            return True
    return False


@cache
def kernel_overloads(version: str | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """(aten overloads with an NPU kernel, e.g. "add.Tensor" or "mm"; torch_npu custom operator
    overloads); with `version`, only kernels whose acl_op or op_api field serves that version."""
    wanted = parse_version(version) if version else None
    aten: set[str] = set()
    custom: set[str] = set()
    with open(KERNEL_TABLE, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(("#", "section\t")) or not line.strip():
                continue
            fields = line.rstrip("\n").split("\t") + ["", ""]
            section, overload, acl_op, op_api = fields[:4]
            if wanted and not (serves(acl_op, wanted) or serves(op_api, wanted)):
                continue
            if section in KERNEL_SECTIONS:
                aten.add(overload)
            elif "custom" in section:
                custom.add(overload)
    return frozenset(aten), frozenset(custom)


@cache
def npu_kernels(version: str | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """`kernel_overloads` with the overloads stripped ("add.Tensor" -> "add")."""
    aten, custom = kernel_overloads(version)
    return frozenset(o.split(".")[0] for o in aten), frozenset(o.split(".")[0] for o in custom)
