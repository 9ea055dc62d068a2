"""Folds the per-file scans into the assessment: tables per section, located findings, the
complexity rating and a summary. Scans arrive one at a time (streamed from the workers)."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from npu_migrate.analyze import catalog
from npu_migrate.analyze.classify import (
    STATUS_CODES,
    STATUS_LABELS,
    STATUSES,
    action_text,
)
from npu_migrate.analyze.effort import EffortModel
from npu_migrate.analyze.findings import finding
from npu_migrate.analyze.memory_section import MemorySection
from npu_migrate.analyze.model import FileScan, ModuleClass, Site
from npu_migrate.analyze.rating import Rating, rate
from npu_migrate.analyze.tables import locations, short_name, where
from npu_migrate.core.diagnostics import Diagnostic, Severity, Table

SECTIONS = ("architecture", "computation", "memory")
APPLY_LINE = "apply --check on these files"
SECTION_CODES = {
    "architecture": ("ANA001", "ANA002", "ANA003", "ANA004", "ANA010", "ANA020"),
    "computation": ("ANA030", "ANA031", "ANA032", "ANA033", "ANA034"),
    "memory": ("ANA040", "ANA041", "ANA042", "ANA043", "ANA044", "ANA045", "ANA046", "ANA047", "ANA048", "ANA049"),
}
@dataclass
class Assessment:
    """The result of `npu-migrate analyze`."""

    title: str
    sections: dict[str, list[Table]] = field(default_factory=dict)
    findings: list[Diagnostic] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    rating: Rating | None = None
    errors: list[str] = field(default_factory=list)  # files that could not be analysed
    engine_errors: list[str] = field(default_factory=list)  # files the codemod engine could not handle


class Aggregator(EffortModel, MemorySection):
    def __init__(self, only: tuple[str, ...] = SECTIONS, torch_npu_version: str | None = None,
                 roots: tuple[str, ...] = ()) -> None:
        self.only = only
        self.torch_npu_version = torch_npu_version
        self.roots = tuple(os.path.abspath(root) for root in roots)
        self.paths: list[str] = []
        self.files = 0
        self.errors: list[str] = []
        self.engine_errors: list[str] = []
        self.sites: list[tuple[str, Site]] = []
        self.classes: list[tuple[str, ModuleClass]] = []
        self.ops: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
        self.distributed: list[tuple[str, str, str, int]] = []
        self.collectives: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.third_party: list[tuple[str, str, str, int]] = []
        self.amp: list[tuple[str, str, int]] = []
        self.autocasts: list[tuple[str, int, str | None, Any]] = []
        self.dataloaders: list[tuple[str, dict[str, Any]]] = []
        self.loader_candidates: list[tuple[str, dict[str, Any]]] = []
        self.loader_classes: set[str] = set()
        self.loader_factories: dict[str, list[str]] = {}
        self.samplers: list[tuple[str, dict[str, Any]]] = []
        self.loops: list[tuple[str, int, int]] = []
        self.accumulation: list[str] = []  # evidence, `path: seen`
        self.checkpointing = False
        self.findings: list[Diagnostic] = []
        self.rating: Rating | None = None  # set by the architecture analysis
        self.module_names: set[str] = set()
        self.apply_counts: Counter[str] = Counter()  # what `apply --check` says of the same files

    def add(self, scan: FileScan) -> None:
        self.apply_counts["files"] += 1
        self.apply_counts["changed"] += scan.apply_changed
        self.apply_counts["failed"] += scan.apply_failed
        self.apply_counts.update(scan.apply_severities)
        if scan.apply_only:
            return
        self.files += 1
        self.paths.append(scan.path)
        path = scan.path
        if scan.error:
            self.errors.append(scan.error)
            return
        if scan.engine_error:
            self.engine_errors.append(scan.engine_error)
        self.sites += [(path, s) for s in scan.sites]
        self.classes += [(path, c) for c in scan.classes]
        for name, line, col in scan.ops:
            self.ops[name].append((path, line, col))
        self.distributed += [(kind, what, path, line) for kind, what, line in scan.distributed]
        for name, line in scan.collectives:
            self.collectives[name].append((path, line))
        self.third_party += [(key, detail, path, line) for key, detail, line in scan.third_party]
        self.amp += [(what, path, line) for what, line in scan.amp]
        self.autocasts += [(path, line, dtype, device) for line, dtype, device in scan.autocasts]
        self.dataloaders += [(path, d) for d in scan.dataloaders]
        self.loader_candidates += [(path, c) for c in scan.loader_candidates]
        self.loader_classes.update(scan.loader_classes)
        for name in scan.loader_factories:
            self.loader_factories.setdefault(name, []).append(path)
        self.samplers += [(path, s) for s in scan.samplers]
        self.loops += [(path, line, col) for line, col in scan.train_loops]
        self.accumulation += [f"{path}: {item}" for item in scan.accumulation]
        self.checkpointing |= scan.checkpointing
        self.findings += scan.findings

    # -- the result ----------------------------------------------------------------------------
    def finish(self, title: str = "Ascend NPU migration assessment") -> Assessment:
        result = Assessment(title, errors=list(self.errors), engine_errors=list(self.engine_errors))
        modules = self._module_classes()
        fallback = self._fallback_ops()
        extra: list[Diagnostic] = []
        if "architecture" in self.only:
            result.sections["architecture"] = self._architecture(modules, fallback, extra)
        if "computation" in self.only:
            result.sections["computation"] = self._computation(fallback, extra)
        if "memory" in self.only:
            result.sections["memory"] = self._memory(modules, extra)
        wanted = {code for section in self.only for code in SECTION_CODES[section]}
        found = [d for d in self.findings + extra if d.code in wanted]
        result.findings = sorted(set(found), key=lambda d: (d.path, d.line, d.col, d.code, d.message))
        result.rating = self.rating
        counts = Counter(d.severity.value for d in result.findings)
        result.summary = {"files analysed": self.files, "files that failed": len(self.errors)}
        if self.engine_errors:
            result.summary["files apply cannot rewrite"] = len(self.engine_errors)
        if self.rating is not None:
            result.summary["migration complexity"] = self.rating.level
            result.summary["estimated effort (person-days)"] = self.rating.total_days
        if "architecture" in self.only:
            result.summary[APPLY_LINE] = self._apply_line()
            statuses = Counter(site.status for _, site in self.sites)
            result.summary["CUDA locations"] = f"{len(self.sites)} (" + ", ".join(
                f"{statuses[s]} {STATUS_LABELS[s]}" for s in STATUSES) + ")"
        result.summary["nn.Module classes"] = len(modules)
        result.summary["findings"] = ", ".join(f"{counts[k]} {k}" for k in ("error", "warning", "info") if counts[k]) or "none"
        return result

    def _apply_line(self) -> str:
        """apply's own counts for the files of this run, in `apply --check`'s terms: its
        diagnostics are not analyze's findings (ANA codes), and it also reads notebooks,
        requirement files and DeepSpeed configurations, which analyze does not analyse."""
        c = self.apply_counts
        return (f"{c['files']} files, {c['changed']} would change, {c['failed']} failed; "
                f"{c['error']} errors, {c['warning']} warnings, {c['info']} info")

    def _module_classes(self) -> list[tuple[str, ModuleClass]]:
        """Classes deriving, directly or through other project classes, from nn.Module."""
        names = {c.name for _, c in self.classes if c.is_torch}
        changed = True
        while changed:
            changed = False
            for _, record in self.classes:
                if record.name not in names and any(b in names for b in record.bases):
                    names.add(record.name)
                    changed = True
        self.module_names = names
        return [(p, c) for p, c in self.classes if c.name in names]

    def _fallback_ops(self) -> dict[str, tuple[str, list[str], list[str]]]:
        """operator -> (status, aten ops, aten ops without an NPU kernel)."""
        table = catalog.operators()
        special = catalog.load("operators")["matmul_operator"]
        status = {}
        for name in self.ops:
            aten = special["aten"] if name == "@" else table[name]["aten"]
            state, missing = catalog.kernel_status(aten, self.torch_npu_version)
            status[name] = (state, aten or [], missing)
        return status

    # -- architecture --------------------------------------------------------------------------
    def _architecture(self, modules, fallback, extra: list[Diagnostic]) -> list[Table]:
        tables = []
        structure = Table("Model structure: nn.Module classes", ["class", "location", "layers", "submodules"])
        layer_counts: Counter[tuple[str, str]] = Counter()
        for path, record in sorted(modules, key=lambda m: (m[0], m[1].line)):
            kinds = Counter((kind, name) for kind, name, _ in record.layers)
            layer_counts.update(kinds)
            subs = Counter(name for name, _ in record.submodules
                           if name in self.module_names and name != record.name)
            sub_text = ", ".join(f"{n} ×{c}" for n, c in sorted(subs.items()))
            if record.repeated:
                sub_text += f" (repeated blocks at line {record.repeated})"
            structure.rows.append([record.name, where(path, record.line),
                                   ", ".join(f"{n} ×{c}" for (_, n), c in sorted(kinds.items())) or "—",
                                   sub_text or "—"])
        tables.append(structure)
        layers = Table("Layer types", ["kind", "layer", "count"])
        layers.rows = [[k, n, c] for (k, n), c in sorted(layer_counts.items())]
        tables.append(layers)

        by_kind = Table("CUDA code locations by kind",
                        ["kind", "locations", *(STATUS_LABELS[s] for s in STATUSES)])
        detail = Table("CUDA code locations", ["location", "kind", "status", "code", "what apply does"])
        kinds = catalog.load("cuda_kinds")["kinds"]
        per_kind: dict[str, Counter[str]] = {k: Counter() for k in kinds}
        for path, site in sorted(self.sites, key=lambda s: (s[0], s[1].line, s[1].col)):
            per_kind.setdefault(site.kind, Counter())[site.status] += 1
            codes = ", ".join(dict.fromkeys(code for code, _, _ in site.actions)) or "—"
            action = action_text(site)
            detail.rows.append([where(path, site.line, site.col), site.kind, STATUS_LABELS[site.status],
                                codes, action])
            label = f"{site.kind}: {site.what}" if site.what else site.kind
            evidence = [f"scanner: {label} at line {site.line}"] if site.what else []
            evidence += [f"apply ({'edit' if a == 'fix' else a}): {c} at line {site.line}"
                         for c, a, _ in dict.fromkeys(site.actions)]
            evidence.append(f"status: {site.status}")
            extra.append(finding(STATUS_CODES[site.status], path, (site.line, site.col), f"{label}: {action}",
                                 evidence=evidence))
        by_kind.rows = [[k, sum(c.values()), *(c[s] for s in STATUSES)] for k, c in per_kind.items() if c]
        tables += [by_kind, detail]

        setups = catalog.load("distributed")["setups"]
        notes = {s["kind"]: s["hccl"] for s in setups}
        grouped: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for kind, what, path, line in self.distributed:
            grouped[kind].append((path, line))
            extra.append(finding("ANA010", path, (line, 0), f"{kind} (`{what}`): {notes[kind]}",
                                 evidence=[f"`{what}` at line {line}"]))
        backends = sorted({s.what for _, s in self.sites if s.what.startswith("backend ")})
        dist = Table("Distributed set-up", ["set-up", "locations", "what changes for HCCL"])
        dist.rows = [[kind, locations(sorted(locs)), notes[kind]] for kind, locs in sorted(grouped.items())]
        if backends:
            dist.rows.append(["backends named", ", ".join(backends), "nccl → hccl"])
        tables.append(dist)

        custom = Table("Custom operations and third-party CUDA code", ["library", "what", "location", "NPU route"])
        entries = catalog.third_party()
        for key, detail_text, path, line in sorted(self.third_party, key=lambda t: (t[2], t[3])):
            entry = entries[key]
            route = catalog.route(entry)
            if entry["library"].lower().startswith("apex"):
                from npu_migrate.analyze.tuning import apex_routes

                route += f" Routes by torch_npu release: {apex_routes()}"
            custom.rows.append([entry["library"], detail_text, where(path, line), route])
            extra.append(finding("ANA020", path, (line, 0), f"{entry['library']} ({detail_text}): {route}",
                                 evidence=[f"{detail_text} at line {line}" if line else f"file {detail_text}"]))
        listed = {(path, line) for _, _, path, line in self.third_party}
        for path, site in self.sites:  # every third-party row of the CUDA locations is listed here too
            if site.kind == "third-party CUDA" and (path, site.line) not in listed:
                code, _, message = site.actions[0] if site.actions else ("—", "", site.what)
                custom.rows.append([_library_of(message), site.what or code, where(path, site.line),
                                    f"{code}: {message}"])
        tables.append(custom)

        self.rating = rate(self._counts(fallback))
        reasons = Table(f"Migration complexity: {self.rating.level} (score {self.rating.score})",
                        ["driver", "count", "points"])
        reasons.rows = [[label, count, points] for label, count, points in self.rating.reasons] or [
            ["no CUDA-specific code found", 0, 0.0]]
        effort = Table(f"Effort estimate: {self.rating.total_days} person-days", ["category", "items", "days", "why"])
        effort.rows = [[label, count, days, self.rating.why.get(label, "")] for label, count, days in self.rating.effort]
        tables += [reasons, effort, self._effort_by_part(fallback)]
        return tables

    # -- computation ---------------------------------------------------------------------------
    def _computation(self, fallback, extra: list[Diagnostic]) -> list[Table]:
        table = catalog.operators()
        heavy = Table("Heavy operators", ["operator", "class", "count", "locations", "NPU support", "aten"])
        classes: Counter[str] = Counter()
        for name, locs in sorted(self.ops.items(), key=lambda item: (-len(item[1]), item[0])):
            cls = "matmul/linear" if name == "@" else table[name]["class"]
            classes[cls] += len(locs)
            state, aten, missing = fallback[name]
            support = state if not missing else f"{state}: no NPU kernel for {', '.join(missing)}"
            heavy.rows.append([short_name(name), cls, len(locs), locations([(path, line) for path, line, _ in sorted(locs)]),
                               support, ", ".join(aten) or "—"])
            if missing:
                for path, line, col in locs:
                    extra.append(finding("ANA030", path, (line, col),
                                         f"`{short_name(name)}` lands on aten::{', aten::'.join(missing)}, which has no "
                                         "NPU kernel: it runs on the CPU (with a copy each way) unless "
                                         "TORCH_NPU_FALLBACK_CPU_DISABLE=1 makes it an error",
                                         evidence=[f"`{short_name(name)}` call at line {line}",
                                                   (f"aten::{', aten::'.join(missing)} not in npu_aten_ops.tsv "
                                                   f"({self.torch_npu_version or 'any version'})")]))
        by_class = Table("Operators by complexity class", ["class", "count"])
        by_class.rows = [[c, n] for c, n in classes.most_common()]
        version = f"torch_npu {self.torch_npu_version}" if self.torch_npu_version else "any torch_npu version"
        support = Table(f"Ascend operator support ({version})", ["status", "operators"])
        for state in ("native", "cpu-fallback risk", "unmapped"):
            names = sorted(short_name(n) for n, (s, _, _) in fallback.items() if s == state)
            if names:
                support.rows.append([state, ", ".join(names)])
        fusion = Table("Fusion opportunities", ["pattern", "location", "NPU route"])
        for d in sorted((d for d in self.findings if d.code == "ANA031"), key=lambda d: (d.path, d.line)):
            pattern, _, route = d.message.partition(": ")
            fusion.rows.append([pattern.removeprefix("fusion (").rstrip(")"), where(d.path, d.line, d.col),
                                route.split(" → ", 1)[-1]])
        amp = Table("Mixed precision (AMP)", ["use", "location"])
        amp.rows = [[short_name(what), where(path, line)] for what, path, line in sorted(self.amp, key=lambda a: (a[1], a[2]))]
        if not self.amp and self.loops:
            for path, line, col in self.loops:
                extra.append(finding("ANA032", path, (line, col),
                                     "training without mixed precision: torch.autocast('npu', dtype=torch.bfloat16) "
                                     "runs matmuls and convolutions on the Cube units at twice the fp32 rate and "
                                     "about halves activation memory (`apply --enable amp` inserts it)",
                                     evidence=[f"training loop at line {line}",
                                               "no autocast or GradScaler anywhere in the analysed files"]))
            amp.rows.append(["not used", locations([(path, line) for path, line, _ in self.loops])])
        extra += self._loss_scaling()
        comm = Table("Distributed communication calls", ["call", "count", "locations", "on NPU"])
        replaced = catalog.load("distributed")["replaced_on_import"]
        for name, calls in sorted(self.collectives.items(), key=lambda item: (-len(item[1]), item[0])):
            comm.rows.append([name, len(calls), locations(sorted(calls)), replaced.get(name, "HCCL collective")])
        return [heavy, by_class, support, fusion, amp, comm]

    def _loss_scaling(self) -> list[Diagnostic]:
        """ANA033: fp16 autocast needs a GradScaler (fp16 gradients underflow); bf16 does not."""
        scalers = [(path, line) for what, path, line in self.amp if what.endswith("GradScaler")]
        known = [(path, line, dtype) for path, line, dtype, device in self.autocasts if device != "cpu"]
        half = [(path, line_no, dtype) for path, line_no, dtype in known
                if dtype is None or "float16" in dtype.replace("bfloat16", "") or dtype.endswith("half")]
        if any(d is not None and d not in ("torch.float16", "torch.half", "torch.bfloat16") for _, _, d in known):
            half = []  # a dtype chosen at run time (`dtype=ptdtype`): the scaler question is not decidable
        brain = [(path, line_no, dtype) for path, line_no, dtype in known
                 if dtype is not None and ("bfloat16" in dtype or dtype.endswith("bf16"))]
        found: list[Diagnostic] = []
        if half and not scalers:
            for path, line, dtype in half:
                found.append(finding(
                    "ANA033", path, (line, 0),
                    "fp16 autocast without loss scaling: small gradients underflow to zero in fp16; add "
                    "torch.amp.GradScaler('npu') (or autocast to torch.bfloat16, which needs no scaler)",
                    severity=Severity.WARNING,
                    evidence=[f"autocast at line {line} with dtype {dtype or 'default (float16 on CUDA and NPU)'}",
                              "no GradScaler anywhere in the analysed files"],
                    confidence="high" if dtype else "medium"))
        if scalers and brain and not half:
            for path, line in scalers:
                found.append(finding(
                    "ANA033", path, (line, 0),
                    "GradScaler with bfloat16 autocast only: bf16 has fp32's exponent range, loss scaling "
                    "is not needed (it costs a check of every gradient per step)",
                    evidence=[f"GradScaler at line {line}"] + [f"bf16 autocast at {where_}:{at}" for where_, at, _ in brain[:3]]))
        return found

def _library_of(message: str) -> str:
    """The library a rule's message is about: its first `quoted` name."""
    quoted = message.split("`")
    return quoted[1] if len(quoted) > 2 else "third-party CUDA"
