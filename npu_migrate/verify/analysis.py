"""From the two sides' records to a verdict: per-tensor metrics, the first diverging module,
peak memory against the reference and the budgets, and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npu_migrate.core.diagnostics import Diagnostic, Report, Severity, Table

from .metrics import Comparison, compare, dtype_name
from .sizes import format_bytes

if TYPE_CHECKING:
    from .core import VerifyOptions

EXIT = {"pass": 0, "fail": 1, "error": 2}
_KIND_ORDER = ("output", "loss", "grad", "param", "buffer", "act")


@dataclass
class Outcome:
    verdict: str  # pass | fail | error
    reason: str
    comparisons: list[Comparison] = field(default_factory=list)
    first_failure: dict[str, Any] | None = None
    memory: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "exit_code": self.exit_code, "reason": self.reason,
                "first_failure": self.first_failure, "memory": self.memory,
                "findings": [d.to_dict() for d in self.findings()],
                "tensors": [c.to_dict() for c in self.comparisons], **self.data}

    def report(self, max_rows: int = 50) -> Report:
        summary: dict[str, Any] = {"verdict": self.verdict.upper(), "reason": self.reason}
        if self.first_failure:
            ff = self.first_failure
            summary["first failing module"] = f"{ff['module']} ({ff.get('class', '?')}, {ff.get('location', '?')})"
        summary.update({k: v for k, v in self.data.items() if k in ("reference", "target", "steps", "amp")})
        for key in ("reference_peak", "target_peak", "peak_ratio", "amp_saving"):
            if key in self.memory:
                summary[key.replace("_", " ")] = self.memory[key + "_text"]
        report = Report("npu-migrate verify", summary=summary)
        rows = [_row(c) for c in self.comparisons]
        if max_rows and len(rows) > max_rows:
            # keep the first divergence, then failing rows, then passing ones, in table order
            first = (self.first_failure or {}).get("tensor")
            rank = sorted(range(len(rows)), key=lambda i: (self.comparisons[i].name != first,
                                                          self.comparisons[i].passed, i))
            keep = sorted(rank[:max_rows])
            rows = [rows[i] for i in keep] + [[(f"... {len(self.comparisons) - len(keep)} rows left out "
                                                "(--max-rows 0 shows all)")] + [""] * 8]
        if rows:
            report.tables.append(Table("Tensors (reference vs migrated)",
                                       ["tensor", "shape", "dtype", "cosine", "max abs", "max rel",
                                        ">1/1000", ">5/1000", "result"], rows))
        if self.memory.get("rows"):
            report.tables.append(Table("Peak memory", ["side", "backend", "peak", "live at start", "budget"],
                                       self.memory["rows"]))
        report.findings = self.findings()
        return report

    def findings(self) -> list[Diagnostic]:
        """VER001 numerical divergence, VER002 the migrated code raised, VER003 over a memory budget."""
        out = []
        root = self.data.get("migrated_root", ".")
        ff = self.first_failure
        if ff:
            file, _, line = str(ff.get("location", "?:0")).rpartition(":")
            path = file if file.startswith("/") else f"{root}/{file}"
            if ff.get("tensor"):
                message = f"first divergence in module '{ff['module']}' ({ff['class']}): {ff['tensor']}: {ff['reason']}"
                out.append(Diagnostic("VER001", message, path, int(line or 0), 0, Severity.ERROR))
            else:
                message = f"migrated code raised in module '{ff['module']}' ({ff['class']}): {ff['reason']}"
                out.append(Diagnostic("VER002", message, path, int(line or 0), 0, Severity.ERROR))
        grew = self.memory.get("grew") or {}
        file, _, line = str(grew.get("location", "")).rpartition(":")
        for failure in self.memory.get("failures", []):
            if file and file != "?" and line.isdigit():  # at the line of the module that grew most
                path = file if file.startswith("/") else f"{root}/{file}"
                out.append(Diagnostic("VER003", failure, path, int(line), 0, Severity.ERROR))
            else:
                out.append(Diagnostic("VER003", failure, root, 0, 0, Severity.ERROR))
        return out


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _row(c: Comparison) -> list[Any]:
    dtype = c.ref_dtype if c.ref_dtype == c.target_dtype else f"{c.ref_dtype}->{c.target_dtype}"
    return [c.name, "x".join(map(str, c.shape)) or "scalar", dtype, _fmt(c.cosine, ".6f"),
            _fmt(c.max_abs, ".3g"), _fmt(c.max_rel, ".3g"), _fmt(c.share_rel_1e3, ".2%"),
            _fmt(c.share_rel_5e3, ".2%"), "pass" if c.passed else f"FAIL: {c.reason}"]


def error_outcome(message: str) -> Outcome:
    return Outcome("error", message)


def _ordered_names(reference: dict[str, Any]) -> list[str]:
    names = list(reference["tensors"])
    return sorted(names, key=lambda n: _KIND_ORDER.index(n.split("/")[0].split(".")[0])
                  if n.split("/")[0].split(".")[0] in _KIND_ORDER else len(_KIND_ORDER))


def _location(module: str, target: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    info = target.get("modules", {}).get(module) or reference.get("modules", {}).get(module) or {}
    return {"module": module, "class": info.get("class", "?"),
            "location": f"{info.get('file', '?')}:{info.get('line', 0)}"}


def _first_divergence(reference: dict[str, Any], by_name: dict[str, Comparison]) -> tuple[str, str] | None:
    """Walk the reference's hook events in order. A failing module output whose inputs passed puts
    the divergence in that module; a failing input puts it in the enclosing module, between its
    children (or in the inputs, at the top level)."""
    stack: list[str] = []
    for event in reference.get("events", []):
        failed = [by_name[n] for n in event["tensors"] if n in by_name and not by_name[n].passed]
        if event["kind"] == "in":
            if failed:
                return (stack[-1] if stack else "<inputs>"), failed[0].name
            stack.append(event["module"])
        else:
            if failed:
                return event["module"], failed[0].name
            if stack and stack[-1] == event["module"]:
                stack.pop()
    return None


def _module_of_tensor(name: str) -> str:
    # "grad/layers.0.weight" -> "layers.0"
    param = name.split("/", 1)[1]
    return param.rsplit(".", 1)[0] if "." in param else "<model>"


def analyze(reference: dict[str, Any], target: dict[str, Any], options: VerifyOptions) -> Outcome:
    amp = bool(target.get("amp_used"))
    comparisons: list[Comparison] = []
    ref_tensors, tgt_tensors = reference["tensors"], target.get("tensors", {})
    target_error = target.get("error")
    for name in _ordered_names(reference):
        ref = ref_tensors[name]
        tgt = tgt_tensors.get(name)
        if tgt is None:
            if target_error:
                continue  # not reached before the migrated side failed
            comparisons.append(Comparison(name, list(ref.shape), dtype_name(ref), "-", None, None, None,
                                          None, None, False, "missing on the migrated side"))
            continue
        th = options.thresholds.for_pair(dtype_name(ref), dtype_name(tgt), amp)
        comparisons.append(compare(name, ref, tgt, th))
    by_name = {c.name: c for c in comparisons}

    first_failure = None
    divergence = _first_divergence(reference, by_name)
    if divergence:
        module, tensor = divergence
        first_failure = {**_location(module, target, reference), "tensor": tensor,
                         "reason": by_name[tensor].reason}
    elif target_error:
        module = target_error.get("module") or "<model>"
        first_failure = {**_location(module, target, reference), "tensor": None,
                         "reason": f"{target_error['type']}: {target_error['message']}",
                         "raised_at": target_error.get("location")}
        if target_error.get("location"):
            first_failure["class_location"] = first_failure["location"]
            first_failure["location"] = target_error["location"]
    else:
        failing = [c for c in comparisons if not c.passed]
        if failing:
            c = failing[0]
            module = _module_of_tensor(c.name) if c.name.startswith(("grad/", "param/", "buffer/")) else "<model>"
            first_failure = {**_location(module, target, reference), "tensor": c.name, "reason": c.reason}

    memory, memory_failures = _memory(reference, target, options, amp)
    failures = [c for c in comparisons if not c.passed]
    if target_error and target_error.get("phase") == "build":
        verdict, reason = "fail", f"the migrated code failed to build: {target_error['type']}: {target_error['message']}"
    elif target_error:
        verdict, reason = "fail", f"the migrated code raised {target_error['type']}: {target_error['message']}"
    elif failures:
        verdict, reason = "fail", f"{len(failures)} of {len(comparisons)} tensors differ beyond thresholds"
    elif memory_failures:
        verdict, reason = "fail", "; ".join(memory_failures)
    else:
        verdict, reason = "pass", f"{len(comparisons)} tensors match within thresholds"
    if verdict == "fail" and memory_failures and reason not in memory_failures:
        reason += "; " + "; ".join(memory_failures)
    data = {"migrated_root": str(options.migrated),
            "reference": f"{reference['backend']} ({options.original})",
            "target": f"{target['backend']} ({options.migrated})",
            "steps": options.steps, "amp": amp, "error": target_error,
            "timing": {"reference": reference.get("timing"), "target": target.get("timing")}}
    return Outcome(verdict, reason, comparisons, first_failure, memory, data)


def _memory(reference: dict[str, Any], target: dict[str, Any], options: VerifyOptions,
            amp: bool) -> tuple[dict[str, Any], list[str]]:
    ref_mem, tgt_mem = reference.get("memory"), target.get("memory")
    if not options.memory:
        ref_mem = tgt_mem = None
    memory: dict[str, Any] = {}
    failures: list[str] = []
    rows = []
    if ref_mem:
        memory["reference_peak"] = ref_mem["peak"]
        memory["reference_peak_text"] = format_bytes(ref_mem["peak"])
        rows.append(["reference", reference["backend"], format_bytes(ref_mem["peak"]),
                     format_bytes(ref_mem["baseline"]), "-"])
    if tgt_mem:
        memory["target_peak"] = tgt_mem["peak"]
        memory["target_peak_text"] = format_bytes(tgt_mem["peak"])
        budget = format_bytes(options.max_peak) if options.max_peak else "-"
        if options.max_peak_ratio:
            budget += f", x{options.max_peak_ratio} reference"
        rows.append(["migrated", target["backend"], format_bytes(tgt_mem["peak"]),
                     format_bytes(tgt_mem["baseline"]), budget])
        if options.max_peak is not None and tgt_mem["peak"] > options.max_peak:
            failures.append(f"peak memory {format_bytes(tgt_mem['peak'])} > --max-peak {format_bytes(options.max_peak)}")
    if ref_mem and tgt_mem and ref_mem["peak"] > 0:
        ratio = tgt_mem["peak"] / ref_mem["peak"]
        memory["peak_ratio"] = ratio
        memory["peak_ratio_text"] = f"{ratio:.3f}"
        if options.max_peak_ratio is not None and ratio > options.max_peak_ratio:
            failures.append(f"peak memory ratio {ratio:.3f} > --max-peak-ratio {options.max_peak_ratio}")
        if amp:
            saving = ref_mem["peak"] - tgt_mem["peak"]
            memory["amp_saving"] = saving
            memory["amp_saving_text"] = (f"{format_bytes(saving)} ({saving / ref_mem['peak']:.1%} "
                                         "of the fp32 reference peak)")
    elif (options.max_peak or options.max_peak_ratio) and not tgt_mem:
        failures.append("peak memory of the migrated side could not be measured")
    grew = module_growth(reference, target)
    if grew is not None:
        memory["grew"] = grew
        if failures:
            failures = [f"{failure} (grew most: module '{grew['module']}' ({grew['class']}, {grew['location']}): "
                        f"{grew['text']})" for failure in failures]
    memory["rows"] = rows
    memory["failures"] = failures
    return memory, failures


def _module_bytes(side: dict[str, Any]) -> dict[str, dict[str, int]]:
    """module -> bytes of its recorded outputs ("activations") and of its own parameters, gradients
    and buffers ("state"), over the recorded steps."""
    sizes: dict[str, dict[str, int]] = {}
    for name, tensor in side.get("tensors", {}).items():
        if not hasattr(tensor, "element_size"):  # a tensor (torch is not imported here)
            continue
        if name.startswith("act/") and "/out" in name:
            module, kind = name[4:].rsplit("#", 1)[0], "activations"
        elif name.startswith(("param/", "grad/", "buffer/")):
            module, kind = _module_of_tensor(name), "state"
        else:
            continue
        entry = sizes.setdefault(module, {"activations": 0, "state": 0})
        entry[kind] += tensor.numel() * tensor.element_size()
    return sizes


def module_growth(reference: dict[str, Any], target: dict[str, Any]) -> dict[str, Any] | None:
    """The module whose tensors grew most from the reference to the migrated side (bytes of its
    outputs, parameters, gradients and buffers; the deepest module on a tie, since a container's
    output is its last child's), with its class and the line that defines it; None if none grew."""
    ref, tgt = _module_bytes(reference), _module_bytes(target)
    best = None
    for module, sizes in tgt.items():
        before = ref.get(module, {"activations": 0, "state": 0})
        growth = {kind: sizes[kind] - before[kind] for kind in sizes}
        total = sum(growth.values())
        rank = (total, module.count(".") + (module != "<model>"))
        if total > 0 and (best is None or rank > best[0]):
            best = (rank, module, growth)
    if best is None:
        return None
    _, module, growth = best
    text = ", ".join(f"{kind} +{format_bytes(value)}" for kind, value in growth.items() if value > 0)
    return {**_location(module, target, reference), "bytes": sum(growth.values()), "text": text}
