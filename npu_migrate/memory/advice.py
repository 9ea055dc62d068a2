"""MEM007: allocator settings that address what the other analyses found.

The PyTorch settings go to PYTORCH_NPU_ALLOC_CONF on Ascend (PYTORCH_CUDA_ALLOC_CONF on CUDA);
torch_npu refuses max_split_size_mb or garbage_collection_threshold next to
expandable_segments:True, so the advice never combines them. TensorFlow code on Ascend
(npu_bridge) gets the matching MemoryConfig options.
"""

from __future__ import annotations

import math

import numpy as np

from npu_migrate.core.diagnostics import Diagnostic, Severity, Table
from npu_migrate.memory.context import DeviceContext
from npu_migrate.memory.data_tables import TABLES

GC_GAP_SHARE = 0.3  # reserved - allocated at the reserved peak, as a share of it


def advice_data() -> dict:
    return TABLES.load("advice.json")


def current_settings(ctx: DeviceContext) -> dict[str, str]:
    """Parse the recorded allocator configuration string (CUDA snapshots carry it)."""
    raw = str(ctx.snapshot.allocator_settings.get("PYTORCH_CUDA_ALLOC_CONF", "") or "")
    pairs = [item.split(":", 1) for item in raw.replace(";", ",").split(",") if ":" in item]
    return {k.strip(): v.strip() for k, v in pairs}


def choose(contexts: list[DeviceContext]) -> list[str]:
    """Names of the settings to recommend, valid together."""
    facts = [c.facts for c in contexts]
    fragmented_devices = [f for f in facts if f.get("oom_fragmented") or f.get("forced_segments")]
    fragmented = bool(fragmented_devices)
    # expandable segments already on everywhere it hurts: only then advise the split limit
    expandable = fragmented and all(f.get("expandable") for f in fragmented_devices)
    cache_heavy = any(f.get("unused_at_peak_reserved", 0) > GC_GAP_SHARE * f.get("peak_reserved", 1)
                      and f.get("peak_reserved", 0) > (1 << 30) for f in facts)
    chosen: list[str] = []
    if fragmented and not expandable:
        chosen.append("expandable_segments")
    elif fragmented and expandable:
        chosen.append("max_split_size_mb_instead")
    if cache_heavy and "expandable_segments" not in chosen and not expandable:
        chosen.append("garbage_collection_threshold")
    return chosen


def split_limit_mb(contexts: list[DeviceContext]) -> int:
    """A max_split_size_mb that keeps the common large requests splittable: the 90th
    percentile of block sizes over 1 MiB, in MiB, rounded up to a power of two."""
    sizes = np.concatenate([c.rep.blocks.size[c.rep.blocks.size > (1 << 20)] for c in contexts]
                           or [np.zeros(0)])
    if not len(sizes):
        return 512
    mb = max(float(np.percentile(sizes, 90)) / (1 << 20), 1.0)
    return int(2 ** math.ceil(math.log2(mb)))


def advise(contexts: list[DeviceContext], path: str) -> tuple[list[Diagnostic], Table | None]:
    """Advice in the producer's own terms: PYTORCH_NPU_ALLOC_CONF for PyTorch and torch_npu
    snapshots, MemoryConfig only for TensorFlow sources, nothing for other frameworks."""
    chosen = choose(contexts)
    framework = contexts[0].snapshot.framework if contexts else "pytorch"
    if not chosen or framework not in ("pytorch", "tensorflow"):
        return [], None
    if framework == "tensorflow":
        return _tensorflow(contexts, chosen, path)
    return _pytorch(contexts, chosen, path)


def _pytorch(contexts: list[DeviceContext], chosen: list[str], path: str
             ) -> tuple[list[Diagnostic], Table]:
    data = advice_data()
    pt = data["pytorch"]
    parts, rows = [], []
    for name in chosen:
        if name == "max_split_size_mb_instead":
            setting = pt["max_split_size_mb"]["setting"].format(mb=split_limit_mb(contexts))
            rows.append([data["env_var"], f"{setting} (only with expandable_segments off)",
                         ("expandable segments are on and fragmentation remains: compare with "
                          "expandable_segments:False plus this limit")])
            parts.append(setting + " (instead of expandable_segments:True)")
            continue
        entry = pt[name]
        setting = entry["setting"].format(mb=split_limit_mb(contexts))
        parts.append(setting)
        rows.append([data["env_var"], setting, f"{entry['when']}: {entry['why']}"])
    message = (f"set {data['env_var']}=\"{','.join(p for p in parts if '(' not in p)}\""
               if any('(' not in p for p in parts) else f"try {parts[0]}")
    on_cuda = (f" ({data['cuda_env_var']} on CUDA)"
               if contexts[0].snapshot.producer.startswith("cuda") else "")
    finding = Diagnostic("MEM007", f"allocator advice: {message}{on_cuda}; never combine "
                         "expandable_segments:True with max_split_size_mb or "
                         "garbage_collection_threshold (torch_npu refuses it)", path, 0, 0,
                         Severity.INFO)
    return [finding], Table("Allocator advice", ["where", "setting", "why"], rows)


def _tensorflow(contexts: list[DeviceContext], chosen: list[str], path: str
                ) -> tuple[list[Diagnostic], Table | None]:
    tf = advice_data()["tensorflow"]
    names = []
    if "expandable_segments" in chosen or "max_split_size_mb_instead" in chosen:
        names.append("static_memory_policy")
    if any(c.facts.get("oom_short") for c in contexts):
        names.append("atomic_clean_policy")
    if not names:
        return [], None
    rows = [["TensorFlow (npu_bridge)", tf[n]["setting"], f"{tf[n]['when']}: {tf[n]['why']}"]
            for n in names]
    finding = Diagnostic("MEM007", "allocator advice (TensorFlow on Ascend): "
                         + ", ".join(tf[n]["setting"] for n in names), path, 0, 0, Severity.INFO)
    return [finding], Table("Allocator advice", ["where", "setting", "why"], rows)
