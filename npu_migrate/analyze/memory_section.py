"""The memory section of the assessment: DataLoaders (roles and advice), transfers and
synchronisation, mixed precision, checkpointing, accumulation, leaks and allocator advice.
A mixin of the Aggregator (it reads the aggregated scans)."""

from __future__ import annotations

from typing import Any

from npu_migrate.analyze import catalog, loaders
from npu_migrate.analyze.blocks import ParameterIndex, checkpoint_verdict
from npu_migrate.analyze.findings import finding
from npu_migrate.analyze.model import Site
from npu_migrate.analyze.tables import MAX_LOCATIONS, locations, short_name, where
from npu_migrate.core.diagnostics import Diagnostic, Table


class MemorySection:
    # set by the Aggregator
    dataloaders: list[tuple[str, dict[str, Any]]]
    loader_candidates: list[tuple[str, dict[str, Any]]]
    loader_classes: set[str]
    loader_factories: dict[str, list[str]]
    findings: list[Diagnostic]
    amp: list[tuple[str, str, int]]
    loops: list[tuple[str, int, int]]
    checkpointing: bool
    accumulation: list[str]
    sites: list[tuple[str, Site]]

    def _loaders(self, extra: list[Diagnostic]) -> Table:
        spec = catalog.load("dataloader")["settings"]
        columns = loaders.COLUMNS
        table = Table("DataLoaders", ["location", "built with", "role", *columns, "sampler", "recommendations"])
        for path, loader in loaders.resolve(self.dataloaders, self.loader_candidates, self.loader_classes,
                                            self.loader_factories):
            settings = loader["settings"]
            role = loader["role"]
            tuned = not loader["unpacked"] and not loaders.is_test_file(path)
            advice = loaders.advice(settings, spec, role, loader["kind"]) if tuned else []
            row = [where(path, loader["line"], loader["col"]), loader["kind"], role or "unknown"]
            row += [repr(settings[c]) if c in settings else f"({spec[c]['default']!r})" for c in columns]
            row += [settings.get("sampler") or settings.get("batch_sampler") or "—", "; ".join(advice) or "—"]
            table.rows.append(row)
            if advice:
                evidence = [loader["construction"], *loader["role_evidence"]]
                evidence.append("settings: " + ", ".join(f"{k}={settings[k]!r}" for k in columns if k in settings)
                                if any(k in settings for k in columns) else "settings: all defaults")
                confidence = "high" if not role or any("by use" in e for e in evidence) else "medium"
                extra.append(finding("ANA040", path, (loader["line"], loader["col"]),
                                     f"DataLoader ({role or 'role unknown'}): " + "; ".join(advice),
                                     evidence=evidence, confidence=confidence))
        return table

    def _checkpointing(self, modules, extra: list[Diagnostic]) -> str:
        """ANA045 for stacks of blocks worth checkpointing (blocks.checkpoint_verdict), once a
        training loop exists and the project does not checkpoint already."""
        if self.checkpointing:
            return "in use (torch.utils.checkpoint)"
        if not self.loops:
            return "no training loop found"
        index = ParameterIndex({c.name: c for _, c in modules})
        advised = []
        for path, record in modules:
            for stack in record.stacks:
                advise, evidence, confidence = checkpoint_verdict(record, stack, index)
                if advise:
                    advised.append((path, stack["line"]))
                    extra.append(finding(
                        "ANA045", path, (stack["line"], 0),
                        f"`{record.name}` chains {stack['count']} `{stack['element']}` blocks with parameters: "
                        "torch.utils.checkpoint on each block trades about one extra forward pass for storing "
                        "only the block inputs", evidence=evidence, confidence=confidence))
        if advised:
            return "opportunity: " + locations(advised)
        return "not needed (no chained stack of blocks with parameters in a trained model)"

    def _memory(self, modules, extra: list[Diagnostic]) -> list[Table]:
        loaders = self._loaders(extra)
        transfers = Table("Host↔device transfers and synchronisation", ["location", "code", "finding"])
        for d in sorted((d for d in self.findings if d.code in ("ANA041", "ANA042", "ANA043", "ANA048")),
                        key=lambda d: (d.path, d.line, d.col)):
            transfers.rows.append([where(d.path, d.line, d.col), d.code, d.message])
        precision = Table("Mixed precision, checkpointing, accumulation and leaks", ["topic", "status", "effect"])
        amp_state = ("in use: " + ", ".join(sorted({short_name(w) for w, _, _ in self.amp}))) if self.amp else (
            "missing" if self.loops else "no training loop found")
        precision.rows.append(["mixed precision", amp_state,
                               "bf16/fp16 activations take half the memory of fp32; bf16 needs no GradScaler"])
        ckpt = self._checkpointing(modules, extra)
        precision.rows.append(["gradient checkpointing", ckpt, "activation memory per block drops to its input"])
        accumulation = ("in use: " + "; ".join(self.accumulation[:MAX_LOCATIONS]) if self.accumulation else
                        ("opportunity (ANA046)" if any(d.code == "ANA046" for d in self.findings) else "—"))
        precision.rows.append(["gradient accumulation", accumulation,
                               "a larger effective batch without more device memory"])
        leaks = [d for d in self.findings if d.code == "ANA044"]
        precision.rows.append(["likely leaks", f"{len(leaks)}: " + locations([(d.path, d.line) for d in leaks]) if leaks else "none found",
                               "each leaked step keeps its whole autograd graph alive"])
        allocator = Table("Allocator advice (PYTORCH_NPU_ALLOC_CONF)", ["location", "advice"])
        for d in sorted((d for d in self.findings if d.code == "ANA047"), key=lambda d: (d.path, d.line)):
            allocator.rows.append([where(d.path, d.line, d.col), d.message])
        for path, site in self.sites:
            if site.what == "PYTORCH_CUDA_ALLOC_CONF":
                message = ("PYTORCH_CUDA_ALLOC_CONF is not read on NPU: use PYTORCH_NPU_ALLOC_CONF; keys such as "
                           "backend:cudaMallocAsync are rejected there, and expandable_segments:True cannot be "
                           "combined with max_split_size_mb or garbage_collection_threshold")
                allocator.rows.append([where(path, site.line, site.col), message])
                extra.append(finding("ANA047", path, (site.line, site.col), message,
                                     evidence=[f"`PYTORCH_CUDA_ALLOC_CONF` at line {site.line}"]))
        return [loaders, transfers, precision, allocator]
