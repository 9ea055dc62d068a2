"""Folds the per-file scans into the assessment: tables per section, located findings, the
complexity rating and a summary. Scans arrive one at a time (streamed from the workers)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from npu_migrate.analyze import catalog
from npu_migrate.analyze.findings import finding
from npu_migrate.analyze.model import FileScan, ModuleClass, Site
from npu_migrate.analyze.rating import Rating, rate
from npu_migrate.core.diagnostics import Diagnostic, Table

SECTIONS = ("architecture", "computation", "memory")
SECTION_CODES = {
    "architecture": ("ANA001", "ANA002", "ANA010", "ANA020"),
    "computation": ("ANA030", "ANA031", "ANA032"),
    "memory": ("ANA040", "ANA041", "ANA042", "ANA043", "ANA044", "ANA045", "ANA046", "ANA047"),
}
MAX_LOCATIONS = 5


def where(path: str, line: int, col: int = 0) -> str:
    return f"{path}:{line}:{col}" if col else f"{path}:{line}"


def locations(items: list[tuple[str, int]], limit: int = MAX_LOCATIONS) -> str:
    shown = ", ".join(f"{p}:{line}" for p, line in items[:limit])
    return shown + (f", … (+{len(items) - limit})" if len(items) > limit else "")


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


class Aggregator:
    def __init__(self, only: tuple[str, ...] = SECTIONS) -> None:
        self.only = only
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
        self.dataloaders: list[tuple[str, dict[str, Any]]] = []
        self.loops: list[tuple[str, int, int]] = []
        self.accumulation = False
        self.checkpointing = False
        self.findings: list[Diagnostic] = []
        self.rating: Rating | None = None  # set by the architecture analysis
        self.module_names: set[str] = set()

    def add(self, scan: FileScan) -> None:
        self.files += 1
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
        self.dataloaders += [(path, d) for d in scan.dataloaders]
        self.loops += [(path, line, col) for line, col in scan.train_loops]
        self.accumulation |= scan.accumulation
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
            manual = sum(1 for _, s in self.sites if _needs_person(s))
            result.summary["CUDA locations"] = f"{len(self.sites)} ({len(self.sites) - manual} automatic, {manual} need a person)"
        result.summary["nn.Module classes"] = len(modules)
        result.summary["findings"] = ", ".join(f"{counts[k]} {k}" for k in ("error", "warning", "info") if counts[k]) or "none"
        return result

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
            state, missing = catalog.kernel_status(aten)
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

        by_kind = Table("CUDA code locations by kind", ["kind", "locations", "automatic (apply)", "need a person"])
        detail = Table("CUDA code locations", ["location", "kind", "code", "what apply does"])
        kinds = catalog.load("cuda_kinds")["kinds"]
        per_kind: dict[str, list[int]] = {k: [0, 0] for k in kinds}
        for path, site in sorted(self.sites, key=lambda s: (s[0], s[1].line, s[1].col)):
            manual = _needs_person(site)
            per_kind.setdefault(site.kind, [0, 0])[1 if manual else 0] += 1
            codes = ", ".join(dict.fromkeys(code for code, _, _ in site.actions)) or "—"
            action = _action_text(site)
            detail.rows.append([where(path, site.line, site.col), site.kind, codes, action])

            code = "ANA002" if manual else "ANA001"
            label = f"{site.kind}: {site.what}" if site.what else site.kind
            extra.append(finding(code, path, (site.line, site.col), f"{label}: {action}"))
        by_kind.rows = [[k, a + m, a, m] for k, (a, m) in per_kind.items() if a + m]
        tables += [by_kind, detail]

        setups = catalog.load("distributed")["setups"]
        notes = {s["kind"]: s["hccl"] for s in setups}
        grouped: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for kind, what, path, line in self.distributed:
            grouped[kind].append((path, line))
            extra.append(finding("ANA010", path, (line, 0), f"{kind} (`{what}`): {notes[kind]}"))
        backends = sorted({s.what for _, s in self.sites if s.what.startswith("backend ")})
        dist = Table("Distributed set-up", ["set-up", "locations", "what changes for HCCL"])
        dist.rows = [[kind, locations(sorted(locs)), notes[kind]] for kind, locs in sorted(grouped.items())]
        if backends:
            dist.rows.append(["backends named", ", ".join(backends), "nccl → hccl"])
        tables.append(dist)

        custom = Table("Custom operations and third-party CUDA code", ["library", "what", "location", "NPU route"])
        entries = {e["cuda"]: e for e in catalog.load("third_party")["entries"]}
        for key, detail_text, path, line in sorted(self.third_party, key=lambda t: (t[2], t[3])):
            entry = entries[key]
            route = (entry["npu"] + ": " if entry["npu"] else "") + entry["note"]
            custom.rows.append([entry["library"], detail_text, where(path, line), route])
            extra.append(finding("ANA020", path, (line, 0), f"{entry['library']} ({detail_text}): {route}"))
        tables.append(custom)

        self.rating = rate(self._counts(fallback))
        reasons = Table(f"Migration complexity: {self.rating.level} (score {self.rating.score})",
                        ["driver", "count", "points"])
        reasons.rows = [[label, count, points] for label, count, points in self.rating.reasons] or [
            ["no CUDA-specific code found", 0, 0.0]]
        effort = Table(f"Effort estimate: {self.rating.total_days} person-days", ["category", "items", "days"])
        effort.rows = [[label, count, days] for label, count, days in self.rating.effort]
        tables += [reasons, effort]
        return tables

    def _counts(self, fallback) -> dict[str, int]:
        entries = {e["cuda"]: e for e in catalog.load("third_party")["entries"]}
        counts: Counter[str] = Counter()
        manual = sum(1 for _, s in self.sites if _needs_person(s))
        counts["manual"] = manual
        counts["automatic"] = len(self.sites) - manual
        counts["cpu_fallback"] = sum(1 for state, _, _ in fallback.values() if state == "cpu-fallback risk")
        kernels = [t for t in self.third_party if t[1].startswith("@")]
        seen: set[tuple[str, str]] = set()
        for key, detail, path, _ in self.third_party:
            weight = entries[key]["weight"]
            if weight == "triton_kernel" and (kernels and not detail.startswith("@")):
                continue
            if detail.startswith("@") or (weight, path) not in seen:
                counts[weight] += 1
                seen.add((weight, path))
        kinds = {kind for kind, _, _, _ in self.distributed}
        counts["distributed"] = len(kinds - {"DeepSpeed", "Megatron-style model parallelism"})
        counts["large_scale"] = len(kinds & {"DeepSpeed", "Megatron-style model parallelism"})
        return dict(counts)

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
            heavy.rows.append([_short(name), cls, len(locs), locations([(p, l) for p, l, _ in sorted(locs)]),
                               support, ", ".join(aten) or "—"])
            if missing:
                for path, line, col in locs:
                    extra.append(finding("ANA030", path, (line, col),
                                         f"`{_short(name)}` lands on aten::{', aten::'.join(missing)}, which has no "
                                         "NPU kernel: it runs on the CPU (with a copy each way) unless "
                                         "TORCH_NPU_FALLBACK_CPU_DISABLE=1 makes it an error"))
        by_class = Table("Operators by complexity class", ["class", "count"])
        by_class.rows = [[c, n] for c, n in classes.most_common()]
        support = Table("Ascend operator support", ["status", "operators"])
        for state in ("native", "cpu-fallback risk", "unmapped"):
            names = sorted(_short(n) for n, (s, _, _) in fallback.items() if s == state)
            if names:
                support.rows.append([state, ", ".join(names)])
        fusion = Table("Fusion opportunities", ["pattern", "location", "NPU route"])
        for d in sorted((d for d in self.findings if d.code == "ANA031"), key=lambda d: (d.path, d.line)):
            pattern, _, route = d.message.partition(": ")
            fusion.rows.append([pattern.removeprefix("fusion (").rstrip(")"), where(d.path, d.line, d.col),
                                route.split(" → ", 1)[-1]])
        amp = Table("Mixed precision (AMP)", ["use", "location"])
        amp.rows = [[_short(what), where(path, line)] for what, path, line in sorted(self.amp, key=lambda a: (a[1], a[2]))]
        if not self.amp and self.loops:
            for path, line, col in self.loops:
                extra.append(finding("ANA032", path, (line, col),
                                     "training without mixed precision: torch.autocast('npu', dtype=torch.bfloat16) "
                                     "runs matmuls and convolutions on the Cube units at twice the fp32 rate and "
                                     "about halves activation memory (`apply --enable amp` inserts it)"))
            amp.rows.append(["not used", locations([(p, l) for p, l, _ in self.loops])])
        comm = Table("Distributed communication calls", ["call", "count", "locations", "on NPU"])
        replaced = catalog.load("distributed")["replaced_on_import"]
        for name, locs in sorted(self.collectives.items(), key=lambda item: (-len(item[1]), item[0])):
            comm.rows.append([name, len(locs), locations(sorted(locs)), replaced.get(name, "HCCL collective")])
        return [heavy, by_class, support, fusion, amp, comm]

    # -- memory --------------------------------------------------------------------------------
    def _memory(self, modules, extra: list[Diagnostic]) -> list[Table]:
        spec = catalog.load("dataloader")["settings"]
        columns = ["batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "drop_last"]
        loaders = Table("DataLoaders", ["location", *columns, "recommendations"])
        for path, loader in sorted(self.dataloaders, key=lambda d: (d[0], d[1]["line"])):
            settings = loader["settings"]
            advice = [] if loader["unpacked"] else _dataloader_advice(settings, spec)
            row = [where(path, loader["line"], loader["col"])]
            row += [repr(settings[c]) if c in settings else f"({spec[c]['default']!r})" for c in columns]
            row.append("; ".join(advice) or "—")
            loaders.rows.append(row)
            if advice:
                extra.append(finding("ANA040", path, (loader["line"], loader["col"]), "DataLoader: " + "; ".join(advice)))
        transfers = Table("Host↔device transfers and synchronisation", ["location", "code", "finding"])
        for d in sorted((d for d in self.findings if d.code in ("ANA041", "ANA042", "ANA043")),
                        key=lambda d: (d.path, d.line, d.col)):
            transfers.rows.append([where(d.path, d.line, d.col), d.code, d.message])
        precision = Table("Mixed precision, checkpointing, accumulation and leaks", ["topic", "status", "effect"])
        amp_state = ("in use: " + ", ".join(sorted({_short(w) for w, _, _ in self.amp}))) if self.amp else (
            "missing" if self.loops else "no training loop found")
        precision.rows.append(["mixed precision", amp_state,
                               "bf16/fp16 activations take half the memory of fp32; bf16 needs no GradScaler"])
        repeated = [(p, c) for p, c in modules if c.repeated]
        if self.checkpointing:
            ckpt = "in use (torch.utils.checkpoint)"
        elif repeated and self.loops:
            ckpt = "opportunity: " + locations([(p, c.repeated) for p, c in repeated])
            for path, record in repeated:
                extra.append(finding("ANA045", path, (record.repeated, 0),
                                     f"`{record.name}` stacks repeated blocks: torch.utils.checkpoint on each block "
                                     "trades about one extra forward pass for storing only the block inputs"))
        else:
            ckpt = "not needed (no repeated blocks in a trained model)" if self.loops else "no training loop found"
        precision.rows.append(["gradient checkpointing", ckpt, "activation memory per block drops to its input"])
        accumulation = ("in use" if self.accumulation else
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
                extra.append(finding("ANA047", path, (site.line, site.col), message))
        return [loaders, transfers, precision, allocator]


def _needs_person(site: Site) -> bool:
    return not site.actions or any(action == "flag" for _, action, _ in site.actions)


def _action_text(site: Site) -> str:
    if not site.actions:
        return "needs a person: no rule rewrites this"
    parts = []
    for code, action, message in site.actions:
        parts.append(f"{code} {'rewrites' if action == 'fix' else 'flags'}: {message}")
    text = "; ".join(dict.fromkeys(parts))
    return text if not _needs_person(site) else "needs a person — " + text


def _short(name: str) -> str:
    for prefix, short in (("torch.nn.functional.", "F."), ("torch.nn.", "nn.")):
        if name.startswith(prefix):
            return short + name[len(prefix):]
    return name


def _dataloader_advice(settings: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    advice = []
    workers = settings.get("num_workers", 0)
    has_workers = not (isinstance(workers, int) and workers == 0)
    for name, rule in spec.items():
        if rule.get("needs_workers") and not has_workers:
            continue
        if name not in settings:
            if "advice_missing" in rule and (rule.get("bad") is None or rule["default"] in rule["bad"]
                                             or name == "batch_size"):
                advice.append(rule["advice_missing"])
        elif settings[name] in rule.get("bad", []) and type(settings[name]) is type(rule["bad"][0]):
            advice.append(rule["advice_bad"])
    return advice

