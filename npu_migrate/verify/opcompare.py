"""Compare two per-op records (reference and migrated), judged against a third (noise).

Alignment: each side's ops become keys (op name, output shapes) and difflib aligns the two key
sequences. Ops present on one side only (a fused or functional replacement, a dropped or an added
op) are not compared; the comparison resumes at the next op both sides run, the nearest common
boundary, so a replacement that computes the same numbers passes.

The rule (docs/verify.md, "Thresholds from measured noise"): for a matched op, `distance` is the
largest of the sample's norm-relative error and the relative errors of msprobe's statistics. The
noise run (the original code with the device's HF32 rounding) gives each op the distance an honest
device run may have; the op diverges when

    distance(reference, migrated) > noise_factor * distance(reference, noise) + floor(dtype)

Without a noise run (an offline dump), the noise term is the op class's expected device error.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

NOISE_FACTOR = 2.0
# float32: a reduction over ~1e5 elements in another order (a device kernel) is off by about sqrt(1e5)
# ulps, 2e-5; the floor covers it, as the noise run measures a single sample of that noise
FLOORS = {"float64": 1e-9, "float32": 3e-5, "bfloat16": 8e-3, "float16": 1e-3}
# per op class, the norm-relative error a device may show with no noise run to measure it
CLASS_NOISE = {"matmul": 2.0**-10, "conv": 2.0**-10, "reduction": 1e-5, "other": 1e-6}
_MATMUL = re.compile(r"\b(mm|addmm|bmm|baddbmm|addbmm|matmul|linear)\b")
_CONV = re.compile(r"conv")
_RANDOM = re.compile(r"dropout|bernoulli|uniform|normal|rand|multinomial|exponential")


def op_class(name: str) -> str:
    base = name.split(".")[1] if name.startswith("aten.") else name
    if _MATMUL.search(base):
        return "matmul"
    if _CONV.search(base):
        return "conv"
    if any(word in base for word in ("sum", "mean", "norm", "softmax", "var")):
        return "reduction"
    return "other"


def key(event: dict[str, Any]) -> tuple:
    """What must agree for two ops to be compared: the op (overload aside: add_.Tensor and the
    add_.List of a foreach loop are the same update), whether it ran in the backward pass, and its
    output shapes. (A fused optimizer zeroes gradients instead of dropping them, so its backward
    accumulates with `add_` where the original assigns: those must not pair with the original's
    optimizer `add_` of the same shape.)"""
    name = event["name"]
    base = name.rsplit(".", 1)[0] if name.startswith("aten.") and name.count(".") >= 2 else name
    return (base, event.get("phase") == "backward", tuple(tuple(o["shape"]) for o in event["outputs"]))


def _rel(a: float | None, b: float | None, scale: float, resolution: float = 0.0) -> float:
    """|a - b| / scale, less `resolution` (the part of the difference the recorded values cannot
    resolve)."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else math.inf
    return max(abs(a - b) - resolution, 0.0) / scale


_EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}


def _rounding_unit(a: float | None, b: float | None, dtypes: tuple[str | None, ...]) -> float:
    """One rounding unit of two extremes: eps of the coarsest dtype times the larger of them.
    An output's Max and Min are single elements. Rounded to a dtype (or computed from inputs so
    rounded: under AMP a float32 op downstream of bfloat16 ones), an element carries up to one unit
    eps * |x| of that rounding, and two honest runs whose extremes differ by a hair before rounding
    may hold neighbouring values, a whole unit apart. Relative to the output's RMS that is
    eps * |Max| / RMS: for a heavy-tailed bfloat16 gradient (Max 15 times its RMS) 0.11, more than
    twice the half unit a rounding to bfloat16 makes against the float32 reference, which is the
    noise run's measure (a LoRA fine-tune's attention gradient, issue 27)."""
    eps = max((_EPS.get(dtype or "", 0.0) for dtype in dtypes), default=0.0)
    magnitude = max(abs(a or 0.0), abs(b or 0.0))
    return eps * magnitude if math.isfinite(magnitude) else 0.0


def distance(ref: dict[str, Any], other: dict[str, Any], across_dtypes: bool = False,
             rounding: str | None = None) -> tuple[float, str]:
    """Largest relative error over the outputs of one op: (distance, reason if not numeric).
    `across_dtypes`: floating outputs of different dtypes are compared by value (the noise run of
    an AMP script against the float32 reference: that distance is the noise autocast makes).
    `rounding`: the dtype the runs' values were rounded to upstream (under AMP, autocast's); the
    extremes are compared to one rounding unit of it or of the outputs' dtypes."""
    worst = 0.0
    for r, t in zip(ref["outputs"], other["outputs"]):
        floating = str(r["dtype"]).startswith(("float", "bfloat")) and str(t["dtype"]).startswith(("float", "bfloat"))
        if r["dtype"] != t["dtype"] and not (across_dtypes and floating):
            return math.inf, f"dtype {r['dtype']} -> {t['dtype']}"
        if t.get("nonfinite", 0) > r.get("nonfinite", 0):
            return math.inf, f"{t['nonfinite']} NaN/Inf where the reference has {r.get('nonfinite', 0)}"
        numel = max(1, math.prod(r["shape"]))
        norm = r.get("Norm") or 0.0
        rms = norm / math.sqrt(numel)
        scale = max(rms, 1e-30)
        dtypes = (str(r["dtype"]), str(t["dtype"]), rounding)
        parts = [_rel(r.get("Norm"), t.get("Norm"), max(norm, 1e-30)), _rel(r.get("Mean"), t.get("Mean"), scale),
                 *(_rel(r.get(stat), t.get(stat), scale, _rounding_unit(r.get(stat), t.get(stat), dtypes))
                   for stat in ("Max", "Min"))]
        rs, ts = r.get("sample"), t.get("sample")
        if isinstance(rs, torch.Tensor) and isinstance(ts, torch.Tensor) and rs.shape == ts.shape:
            finite = torch.isfinite(rs)
            if not torch.equal(finite, torch.isfinite(ts)) or not torch.equal(rs[~finite], ts[~finite]):
                return math.inf, "NaN/Inf at other positions than in the reference"
            rs, ts = rs[finite].double(), ts[finite].double()
            denominator = max(float(rs.norm()), 1e-30)
            parts.append(float((ts - rs).norm()) / denominator)
        if norm == 0.0 and (t.get("Norm") or 0.0) == 0.0:
            parts = [0.0]
        worst = max(worst, *parts)
    return worst, ""


@dataclass
class Divergence:
    kind: str  # op | loss | seed | print
    name: str
    site: str | None
    reason: str
    distance: float | None = None
    tolerance: float | None = None
    step: int | None = None
    module: dict[str, Any] | None = None
    reference_site: str | None = None
    extra_ops: list[dict[str, Any]] = field(default_factory=list)
    seq: float = 0  # position in the run (a cause found between two events gets a half step)
    missing_ops: list[dict[str, Any]] = field(default_factory=list)  # only the original runs them

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Comparison:
    matched: int = 0
    only_reference: int = 0
    only_migrated: int = 0
    worst_ratio: float = 0.0
    first: Divergence | None = None
    noise_measured: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per matched op: msprobe's columns and the verdict


MSPROBE_COLUMNS = ("Cosine", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandth Err Ratio")


def msprobe_columns(ref: dict[str, Any], tgt: dict[str, Any]) -> dict[str, Any]:
    """msprobe's comparison columns for one output (Ascend/msprobe pytorch_accuracy_compare_instruct.md,
    "Comparison Metric Calculation Formulas"): in real-data mode, over our evenly spaced sample of the
    output, Cosine, MaxAbsErr, MaxRelativeErr and the shares of elements whose relative error is
    below 1/1000 and 5/1000 (MaxRelativeErr None where the bench has a 0 the other side does not:
    msprobe shows inf there); in statistics mode (no sample, e.g. a device dump) the differences of
    Max, Min, Mean and L2 norm."""
    columns: dict[str, Any] = dict.fromkeys(MSPROBE_COLUMNS)
    for stat, label in (("Max", "Max diff"), ("Min", "Min diff"), ("Mean", "Mean diff"), ("Norm", "L2norm diff")):
        a, b = ref.get(stat), tgt.get(stat)
        columns[label] = None if a is None or b is None else b - a
    rs, ts = ref.get("sample"), tgt.get("sample")
    if not (isinstance(rs, torch.Tensor) and isinstance(ts, torch.Tensor) and rs.shape == ts.shape and rs.numel()):
        return columns
    finite = torch.isfinite(rs) & torch.isfinite(ts)
    b, n = rs[finite].double(), ts[finite].double()
    if not b.numel():
        return columns
    diff = (n - b).abs()
    relative = torch.where(diff == 0, torch.zeros_like(diff), diff / b.abs())  # inf where only the bench is 0
    norms = float(b.norm()) * float(n.norm())
    max_relative = float(relative.max())
    columns.update({"Cosine": float((b * n).sum()) / norms if norms > 0 else (1.0 if float(diff.max()) == 0 else 0.0),
                    "MaxAbsErr": float(diff.max()),
                    "MaxRelativeErr": max_relative if math.isfinite(max_relative) else None,
                    "One Thousandth Err Ratio": float((relative < 1e-3).double().mean()),
                    "Five Thousandth Err Ratio": float((relative < 5e-3).double().mean())})
    return columns


def _ops(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] in ("op", "loss")]


def _aligned(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[tuple[str, int, int, int, int]]:
    """difflib opcodes over the whole sequences, aligned step by step: the steps (backward calls)
    are synchronisation points, so repeated step structure cannot shift the match by a step."""
    opcodes: list[tuple[str, int, int, int, int]] = []
    a_start = b_start = 0
    for a_end, b_end in zip(_step_ends(a), _step_ends(b)):
        matcher = difflib.SequenceMatcher(None, [key(e) for e in a[a_start:a_end]],
                                          [key(e) for e in b[b_start:b_end]], autojunk=False)
        opcodes += [(tag, i1 + a_start, i2 + a_start, j1 + b_start, j2 + b_start)
                    for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
        a_start, b_start = a_end, b_end
    if a_start < len(a) or b_start < len(b):  # one side ran more steps than the other
        opcodes.append(("replace" if a_start < len(a) and b_start < len(b) else
                        "delete" if a_start < len(a) else "insert", a_start, len(a), b_start, len(b)))
    return opcodes


def _step_ends(events: list[dict[str, Any]]) -> list[int]:
    """End index (exclusive) of each step's events; the last step runs to the end."""
    ends = [i for i in range(1, len(events)) if events[i].get("step") != events[i - 1].get("step")]
    return ends + [len(events)]


def _noise_of(ref_ops: list[dict[str, Any]], noise_ops: list[dict[str, Any]] | None,
              rounding: str | None = None) -> dict[int, float]:
    """Reference op position -> distance to the noise run at that op."""
    if not noise_ops:
        return {}
    noise: dict[int, float] = {}
    for tag, i1, i2, j1, _ in _aligned(ref_ops, noise_ops):
        if tag == "equal":
            for offset in range(i2 - i1):
                value, reason = distance(ref_ops[i1 + offset], noise_ops[j1 + offset], True, rounding)
                noise[i1 + offset] = 0.0 if reason else value
    return noise


def compare_records(reference: list[dict[str, Any]], migrated: list[dict[str, Any]],
                    noise: list[dict[str, Any]] | None, noise_factor: float = NOISE_FACTOR,
                    floors: dict[str, float] | None = None, rounding: str | None = None) -> Comparison:
    """`rounding`: the dtype both runs' values were rounded to (under AMP, autocast's: see
    `coarsest_dtype`), for the extremes' resolution (`_rounding_unit`)."""
    floors = {**FLOORS, **(floors or {})}
    result = Comparison(noise_measured=noise is not None)
    candidates: list[Divergence] = []
    seed_divergence = _first_seed_divergence(reference, migrated)
    if seed_divergence:
        candidates.append(seed_divergence)
    ref_ops, tgt_ops = _ops(reference), _ops(migrated)
    noise_at = _noise_of(ref_ops, _ops(noise) if noise is not None else None, rounding)
    previous: tuple[str, int, int, int, int] | None = None
    first_op: Divergence | None = None
    blocks = _aligned(ref_ops, tgt_ops)
    unmatched_casts = Counter(_cast_at(e) for tag, i1, i2, _, _ in blocks if tag != "equal" for e in ref_ops[i1:i2])
    for block in blocks:
        tag, i1, i2, j1, j2 = block
        if tag != "equal":
            result.only_reference += i2 - i1
            result.only_migrated += j2 - j1
            previous = block
            if first_op is None:
                first_op = _lowered_precision(ref_ops[i1:i2], tgt_ops[j1:j2], unmatched_casts) or (
                    _boundary(ref_ops, tgt_ops, block, noise_at, noise is not None, noise_factor, floors, rounding)
                    if tag == "replace" else None)
            continue
        for offset in range(i2 - i1):
            ref, tgt = ref_ops[i1 + offset], tgt_ops[j1 + offset]
            result.matched += 1
            value, reason = distance(ref, tgt, rounding=rounding)
            floor = max(floors.get(o["dtype"], 0.0) for o in ref["outputs"]) if ref["outputs"] else 0.0
            expected = noise_at.get(i1 + offset, 0.0) if noise is not None else CLASS_NOISE[op_class(ref["name"])]
            tolerance = noise_factor * expected + floor
            if noise is not None and i1 + offset not in noise_at and _is_cast(ref):
                # a cast the float32 reference does not run (AMP): widening is exact, its input's
                # difference was judged where the input was made; narrowing adds its rounding to
                # the noise of the op that made its input
                tolerance = (math.inf if _widening(ref) else
                             noise_factor * _producer_noise(ref_ops, i1 + offset, noise_at) + floor)
            if tolerance > 0 and math.isfinite(value):
                result.worst_ratio = max(result.worst_ratio, value / tolerance)
            result.rows.append(_row(ref, tgt, value, tolerance, reason))
            if value <= tolerance:
                continue
            if first_op is None:
                extra, missing = [], []
                if offset == 0 and previous is not None:  # right after ops only one side runs
                    extra = [{"name": e["name"], "site": e.get("site")} for e in tgt_ops[previous[3]:previous[4]]]
                    missing = [{"name": e["name"], "site": e.get("site")} for e in ref_ops[previous[1]:previous[2]]]
                why = reason or f"differs by {value:.3g} (norm-relative) > tolerance {tolerance:.3g}"
                if _RANDOM.search(ref["name"]) and not reason:
                    why += " (a random op: on a device it draws from the device's generator)"
                first_op = Divergence(tgt["kind"], tgt["name"], tgt.get("site"), why, value, tolerance,
                                      tgt.get("step"), tgt.get("module"), ref.get("site"), extra, tgt["seq"],
                                      missing)
        previous = block
    if first_op is not None:
        candidates.append(first_op)
    prints = _first_print_divergence(reference, migrated, noise, noise_factor)
    if prints:
        candidates.append(prints)
    if candidates:
        result.first = min(candidates, key=lambda d: d.seq)
    return result


def coarsest_dtype(events: list[dict[str, Any]]) -> str | None:
    """The low-precision floating dtype (bfloat16 before float16: the coarser) of a run's op
    outputs, if any: under AMP, the dtype autocast rounds to."""
    found = {o["dtype"] for e in _ops(events) for o in e["outputs"]}
    return next((dtype for dtype in ("bfloat16", "float16") if dtype in found), None)


def seq_mapper(reference: list[dict[str, Any]], migrated: list[dict[str, Any]]) -> tuple[Any, float]:
    """(to_migrated_seq, end): where the migrated run stands when the original reaches its event
    number `seq` (just before the migrated op aligned with the original's next op), and the
    migrated run's last event number."""
    import bisect

    ref_ops, tgt_ops = _ops(reference), _ops(migrated)
    end = float(migrated[-1]["seq"]) if migrated else 0.0
    position: dict[int, int] = {}
    for tag, i1, i2, j1, _ in _aligned(ref_ops, tgt_ops):
        for offset in range(i2 - i1):
            position[i1 + offset] = j1 + (offset if tag == "equal" else 0)
    ref_seqs = [e["seq"] for e in ref_ops]

    def to_migrated_seq(seq: int) -> float:
        index = bisect.bisect_right(ref_seqs, seq)
        j = position.get(index)
        if j is None or j >= len(tgt_ops):
            return end + 0.5
        return tgt_ops[j]["seq"] - 0.5

    return to_migrated_seq, end


def _row(ref: dict[str, Any], tgt: dict[str, Any], value: float, tolerance: float, reason: str) -> dict[str, Any]:
    first_ref, first_tgt = ref["outputs"][0], tgt["outputs"][0]
    return {"op": tgt["name"], "api": tgt.get("api"), "site": tgt.get("site"), "step": tgt.get("step"),
            "phase": tgt.get("phase"), "seq": tgt.get("seq"), "shape": first_tgt.get("shape"),
            "dtype": first_tgt.get("dtype"), **msprobe_columns(first_ref, first_tgt),
            "distance": value if math.isfinite(value) else None, "tolerance": tolerance,
            "result": "pass" if value <= tolerance else "diverges" + (f" ({reason})" if reason else "")}


_LOW_PRECISION = ("float16", "bfloat16")


def _is_cast(event: dict[str, Any]) -> bool:
    return event["name"].startswith("aten._to_copy")


def _widening(event: dict[str, Any]) -> bool:
    """A cast to float32/float64: under AMP, the `x.float()` of a bfloat16 activation."""
    return all(o["dtype"] in ("float32", "float64") for o in event["outputs"])


def _producer_noise(ops: list[dict[str, Any]], at: int, noise_at: dict[int, float], reach: int = 64) -> float:
    """The measured noise of the op that made a cast's input: the nearest op before it with the
    same output shape and a measured noise (0 when none is within `reach` ops)."""
    shapes = [o["shape"] for o in ops[at]["outputs"]]
    for index in range(at - 1, max(at - reach, 0) - 1, -1):
        if index in noise_at and [o["shape"] for o in ops[index]["outputs"]] == shapes:
            return noise_at[index]
    return 0.0


def _cast_at(event: dict[str, Any]) -> tuple:
    """An op as a low-precision cast is told apart: op, pass, shapes, dtypes, file and step (the
    file, not the line: a migrated file's lines move)."""
    file = (event.get("site") or "").rpartition(":")[0]
    return (*key(event), tuple(o["dtype"] for o in event["outputs"]), file, event.get("step"))


def _lowered_precision(ref_ops: list[dict[str, Any]], tgt_ops: list[dict[str, Any]],
                       original_casts: Counter[tuple]) -> Divergence | None:
    """Ops only the migrated code runs that produce float16/bfloat16 where the original's ops at
    that place produce none: a precision loss (a round trip), whatever its size. An op the original
    also runs in the same file and step with the same output, unpaired (`original_casts`, counted
    over the whole run), was only reordered: the emulated npu's autocast casts a linear's input
    before its weight, the C++ autocast of the CPU (and of a device) the weight first."""
    ref_dtypes = {o["dtype"] for e in ref_ops for o in e["outputs"]}
    for event in tgt_ops:
        lowered = [o["dtype"] for o in event["outputs"] if o["dtype"] in _LOW_PRECISION and o["dtype"] not in ref_dtypes]
        if lowered and original_casts[_cast_at(event)] > 0:
            original_casts[_cast_at(event)] -= 1  # one of the original's, run at another place
            continue
        if lowered:
            return Divergence(event["kind"], event["name"], event.get("site"),
                              f"the migrated code lowers precision to {lowered[0]} here (the original "
                              f"computes in {', '.join(sorted(ref_dtypes)) or 'float32'})",
                              step=event.get("step"), module=event.get("module"), seq=event["seq"])
    return None


def _boundary(ref_ops, tgt_ops, block, noise_at, measured, noise_factor, floors, rounding) -> Divergence | None:
    """A block of ops replaced by others (a fused op, a functional form, another init call) is
    compared at its boundary: the last output of each side, when their shapes agree."""
    _, _, i2, _, j2 = block
    ref, tgt = ref_ops[i2 - 1], tgt_ops[j2 - 1]
    if [o["shape"] for o in ref["outputs"]] != [o["shape"] for o in tgt["outputs"]]:
        return None
    value, reason = distance(ref, tgt, rounding=rounding)
    floor = max((floors.get(o["dtype"], 0.0) for o in ref["outputs"]), default=0.0)
    expected = noise_at.get(i2 - 1, 0.0) if measured else CLASS_NOISE[op_class(ref["name"])]
    tolerance = noise_factor * expected + floor
    if value <= tolerance:
        return None
    why = reason or f"differs by {value:.3g} (norm-relative) > tolerance {tolerance:.3g}"
    return Divergence(tgt["kind"], tgt["name"], tgt.get("site"),
                      f"{why}, where the original runs {ref['name']} instead", value, tolerance,
                      tgt.get("step"), tgt.get("module"), ref.get("site"), seq=tgt["seq"])


def _first_seed_divergence(reference: list[dict[str, Any]], migrated: list[dict[str, Any]]) -> Divergence | None:
    ref_seeds = [e for e in reference if e["kind"] == "seed"]
    tgt_seeds = [e for e in migrated if e["kind"] == "seed"]
    for ref, tgt in zip(ref_seeds, tgt_seeds):
        if ref["value"] != tgt["value"]:
            return Divergence("seed", tgt["name"], tgt.get("site"),
                              f"seeded with {tgt['value']}, the original with {ref['value']}",
                              step=tgt.get("step"), reference_site=ref.get("site"), seq=tgt["seq"])
    if len(ref_seeds) != len(tgt_seeds):
        extra = (tgt_seeds or ref_seeds)[min(len(ref_seeds), len(tgt_seeds))]
        side = "migrated" if len(tgt_seeds) > len(ref_seeds) else "original"
        return Divergence("seed", extra["name"], extra.get("site"), f"only the {side} code seeds here",
                          step=extra.get("step"), seq=extra["seq"] if side == "migrated" else 0)
    return None


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_METRIC = re.compile(r"loss|acc|ppl|perplexity|nll|error|score|metric|top-?\d", re.IGNORECASE)
_TIMING = re.compile(r"ms|sec|time|elapsed|it/s|/s\b|speed|throughput", re.IGNORECASE)


def _metrics(text: str) -> list[tuple[str, float, float]]:
    """(label, value, printed precision) of each number a metric word labels in a printed line."""
    found = []
    for match in _NUMBER.finditer(text):
        label = text[max(0, match.start() - 24):match.start()]
        label = re.split(r"[|,;\t]", label)[-1]
        if not _METRIC.search(label) or _TIMING.search(label):
            continue
        token = match.group()
        decimals = len(token.split(".")[1].split("e")[0].split("E")[0]) if "." in token else 0
        found.append((label.strip(), float(token), 0.5 * 10.0 ** -decimals))
    return found


def _first_print_divergence(reference, migrated, noise, noise_factor) -> Divergence | None:
    ref_lines = [e for e in reference if e["kind"] == "print" and _metrics(e["text"])]
    tgt_lines = [e for e in migrated if e["kind"] == "print" and _metrics(e["text"])]
    noise_lines = [e for e in (noise or []) if e["kind"] == "print" and _metrics(e["text"])]
    for index, (ref, tgt) in enumerate(zip(ref_lines, tgt_lines)):
        noisy = _metrics(noise_lines[index]["text"]) if index < len(noise_lines) else []
        for position, ((label, r, precision), (_, t, _)) in enumerate(zip(_metrics(ref["text"]), _metrics(tgt["text"]))):
            spread = abs(noisy[position][1] - r) if position < len(noisy) else 0.0
            if abs(t - r) > noise_factor * spread + precision + 1e-6 * abs(r):
                return Divergence("print", label or "printed metric", tgt.get("site"),
                                  f"printed {t} where the original printed {r}",
                                  step=tgt.get("step"), reference_site=ref.get("site"), seq=tgt["seq"])
    return None
