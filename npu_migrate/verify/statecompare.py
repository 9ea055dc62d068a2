"""Compare what two script-mode runs did besides their ops (statecapture): mode changes, autocast
regions, saved objects and the state they end with. Each returns the first divergence of its kind
(opcompare.Divergence), placed in the run's order by `seq` so the earliest cause wins over the ops
it affects: an `eval()` the original does not make is reported at its line, not at the dropout op
it turns off.

A change only the original makes has no line in the migrated run: its `reference_site` is set and
`site` is left for the caller to map into the migrated tree; its `seq` is where the migrated run
stands at that point (`to_migrated_seq`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Any

from .opcompare import FLOORS, Divergence, distance

SeqMap = Callable[[int], float]
SiteMap = Callable[[str | None], str | None]  # a line of the original -> the line standing there in the migrated tree


def _events(record: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in record if event["kind"] == kind]


def _device(name: str) -> str:
    """autocast's device as the comparison sees it: "cuda" of the original is the NPU's "npu"."""
    return "cpu" if name == "cpu" else "device"


def _first_sequence_divergence(ref_events: list[dict[str, Any]], tgt_events: list[dict[str, Any]],
                               key: Callable[[dict[str, Any]], tuple], describe: Callable[[dict[str, Any]], str],
                               kind: str, to_migrated_seq: SeqMap, migrated_end: float,
                               map_site: SiteMap) -> Divergence | None:
    """Events are the same when their key agrees and they come from the same line (the original's
    line mapped into the migrated tree)."""
    matcher = difflib.SequenceMatcher(None, [(*key(e), map_site(e.get("site"))) for e in ref_events],
                                      [(*key(e), e.get("site")) for e in tgt_events], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j1 < j2:  # the migrated run does something here the original does not
            event = tgt_events[j1]
            original = f"; the original does not (its next such change: at {ref_events[i1].get('site')})" \
                if i1 < i2 else "; the original does not"
            return Divergence(kind, event["name"], event.get("site"),
                              f"the migrated code {describe(event)} here{original}",
                              step=event.get("step"), reference_site=ref_events[i1].get("site") if i1 < i2 else None,
                              seq=event["seq"])
        event = ref_events[i1]
        seq = to_migrated_seq(event["seq"])
        if seq >= migrated_end:  # the migrated run stopped before this point (it raised)
            return None
        return Divergence(kind, event["name"], None,
                          f"the original {describe(event)} here (at {event.get('site')}); the migrated code does not",
                          step=event.get("step"), reference_site=event.get("site"), seq=seq)
    return None


def mode_divergence(reference: list[dict[str, Any]], migrated: list[dict[str, Any]], to_migrated_seq: SeqMap,
                    migrated_end: float, map_site: SiteMap) -> Divergence | None:
    """The first `train()`/`eval()` that changes a mode on one side and not on the other."""
    return _first_sequence_divergence(
        _events(reference, "mode"), _events(migrated, "mode"),
        key=lambda e: (e["name"], e.get("class")),
        describe=lambda e: f"switches {e.get('class')} to {'training' if e['value'] else 'eval'} mode",
        kind="mode", to_migrated_seq=to_migrated_seq, migrated_end=migrated_end, map_site=map_site)


def region_divergence(reference: list[dict[str, Any]], migrated: list[dict[str, Any]], to_migrated_seq: SeqMap,
                      migrated_end: float, map_site: SiteMap) -> Divergence | None:
    """The first enabled autocast region that one side enters and the other does not (or in another dtype)."""
    def enabled(record: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in _events(record, "region") if e.get("enabled")]

    return _first_sequence_divergence(
        enabled(reference), enabled(migrated),
        key=lambda e: (_device(e.get("device", "")), e.get("dtype")),
        describe=lambda e: f"enters an autocast region ({e.get('device')}, {e.get('dtype')})",
        kind="precision", to_migrated_seq=to_migrated_seq, migrated_end=migrated_end, map_site=map_site)


def _entries_divergence(ref: list[dict[str, Any]], tgt: list[dict[str, Any]], noise: list[dict[str, Any]] | None,
                        noise_factor: float) -> str | None:
    """Why two lists of saved/state entries ({"key", "tensor" | "value"}) differ, or None."""
    ref_keys, tgt_keys = [e["key"] for e in ref], [e["key"] for e in tgt]
    if len(ref_keys) != len(tgt_keys):
        only_ref = sorted(set(ref_keys) - set(tgt_keys))[:3]
        only_tgt = sorted(set(tgt_keys) - set(ref_keys))[:3]
        return (f"{len(tgt_keys)} entries where the original has {len(ref_keys)} (only in the original: "
                f"{', '.join(only_ref) or '-'}; only in the migrated: {', '.join(only_tgt) or '-'})")
    noise_by_key = {e["key"]: e for e in noise or []}
    for r, t in zip(ref, tgt):
        if ("tensor" in r) != ("tensor" in t):
            return f"{t['key']}: a tensor on one side only"
        if "tensor" in r:
            reason = _tensor_reason(r, t, noise_by_key.get(r["key"]), noise_factor)
        else:
            reason = _value_reason(r.get("value"), t.get("value"), (noise_by_key.get(r["key"]) or {}).get("value"))
        if reason:
            return f"{t['key']}: {reason}"
    return None


def _tensor_reason(r: dict[str, Any], t: dict[str, Any], noise: dict[str, Any] | None, noise_factor: float) -> str | None:
    rs, ts = r["tensor"], t["tensor"]
    if rs["shape"] != ts["shape"]:
        return f"shape {rs['shape']} -> {ts['shape']}"
    value, reason = distance({"outputs": [rs]}, {"outputs": [ts]})
    if reason:
        return reason
    expected = distance({"outputs": [rs]}, {"outputs": [noise["tensor"]]})[0] if noise and "tensor" in noise else 0.0
    tolerance = noise_factor * (expected if math.isfinite(expected) else 0.0) + FLOORS.get(rs["dtype"], 0.0)
    return None if value <= tolerance else f"differs by {value:.3g} (norm-relative) > tolerance {tolerance:.3g}"


def _value_reason(ref: Any, tgt: Any, noise: Any) -> str | None:
    if isinstance(ref, float) and isinstance(tgt, float):
        spread = abs(noise - ref) if isinstance(noise, float) else 0.0
        return None if abs(ref - tgt) <= 2 * spread + 1e-6 * max(abs(ref), 1e-12) else f"{ref!r} -> {tgt!r}"
    if isinstance(ref, list) and isinstance(tgt, list) and len(ref) == len(tgt):
        return next((reason for a, b in zip(ref, tgt) if (reason := _value_reason(a, b, None))), None)
    return None if ref == tgt else f"{ref!r} -> {tgt!r}"


def save_divergence(reference: list[dict[str, Any]], migrated: list[dict[str, Any]],
                    noise: list[dict[str, Any]] | None, noise_factor: float) -> Divergence | None:
    """The first `torch.save` whose object differs (keys, dtypes, shapes, values beyond the noise)."""
    ref_saves, tgt_saves = _events(reference, "save"), _events(migrated, "save")
    noise_saves = _events(noise, "save") if noise is not None else []
    for index, (ref, tgt) in enumerate(zip(ref_saves, tgt_saves)):
        noisy = noise_saves[index]["entries"] if index < len(noise_saves) else None
        reason = _entries_divergence(ref["entries"], tgt["entries"], noisy, noise_factor)
        if reason:
            return Divergence("save", "torch.save", tgt.get("site"), f"saves another object: {reason}",
                              step=tgt.get("step"), reference_site=ref.get("site"), seq=tgt["seq"])
    if len(tgt_saves) > len(ref_saves):
        extra = tgt_saves[len(ref_saves)]
        return Divergence("save", "torch.save", extra.get("site"), "only the migrated code saves here",
                          step=extra.get("step"), seq=extra["seq"])
    return None


def state_divergence(reference: list[dict[str, Any]], migrated: list[dict[str, Any]],
                     noise: list[dict[str, Any]] | None, noise_factor: float) -> Divergence | None:
    """The first optimizer or model whose final state differs: hyperparameters, optimizer state,
    the modes of its modules, its buffers (running statistics). Placed at the line that built it."""
    noise_states = _events(noise, "state") if noise is not None else []
    for what in ("optimizer", "model"):
        refs = [e for e in _events(reference, "state") if e["what"] == what]
        tgts = [e for e in _events(migrated, "state") if e["what"] == what]
        noisy = [e for e in noise_states if e["what"] == what]
        for index, (ref, tgt) in enumerate(zip(refs, tgts)):
            reason = _state_reason(ref, tgt, noisy[index] if index < len(noisy) else None, noise_factor)
            if reason:
                return Divergence("state", tgt["name"], tgt.get("built"), f"ends in another state: {reason}",
                                  step=tgt.get("step"), reference_site=ref.get("built"),
                                  module={"path": tgt["name"], "class": tgt.get("class"), "built": tgt.get("built")},
                                  seq=tgt["seq"])
    return None


def _state_reason(ref: dict[str, Any], tgt: dict[str, Any], noise: dict[str, Any] | None,
                  noise_factor: float) -> str | None:
    if ref["what"] == "optimizer":
        for group, (a, b) in enumerate(zip(ref["groups"], tgt["groups"])):
            for key in sorted(set(a) & set(b)):
                reason = _value_reason(a[key], b[key], None)
                if reason:
                    return f"param group {group}: {key} {reason}"
        return _entries_divergence(ref["state"], tgt["state"], noise["state"] if noise else None, noise_factor)
    if ref["modes"] != tgt["modes"]:
        ref_training, tgt_training = sum(ref["modes"]), sum(tgt["modes"])
        return (f"{tgt_training} of its {len(tgt['modes'])} modules in training mode, the original "
                f"{ref_training} of {len(ref['modes'])}")
    return _entries_divergence(ref["buffers"], tgt["buffers"], noise["buffers"] if noise else None, noise_factor)


def new_hooks(reference: list[dict[str, Any]], migrated: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hook registrations only the migrated code makes (by kind and function of the tree)."""
    seen: dict[tuple, int] = {}
    for event in _events(reference, "hook"):
        seen[(event["name"], event.get("class"))] = seen.get((event["name"], event.get("class")), 0) + 1
    extra = []
    for event in _events(migrated, "hook"):
        key = (event["name"], event.get("class"))
        if seen.get(key, 0) > 0:
            seen[key] -= 1
        else:
            extra.append(event)
    return extra
