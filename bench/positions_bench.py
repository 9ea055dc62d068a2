"""Positions benchmark: `codemods.api.positions.node_positions` against LibCST's public
position providers, on the calls the engine really makes.

    python bench/positions_bench.py                  # torch's cuda, amp, distributed, utils
    python bench/positions_bench.py PATH ... --repeat 7

Runs the engine (default rules) over the Python files under PATHs, records every
`node_positions` call, checks that ours agree with PositionProvider on every node asked for,
then times each way on the recorded calls (CPU time, median of --repeat, interleaved):
- ours: one code generation pass noting where the wanted nodes start;
- `MetadataWrapper(unsafe_skip_copy=True).resolve(ByteSpanPositionProvider)` + the module text;
- `MetadataWrapper(unsafe_skip_copy=True).resolve(PositionProvider)`.
Also prints the share of the engine's CPU time that positions take.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path

import libcst as cst
from libcst.metadata import ByteSpanPositionProvider, MetadataWrapper, PositionProvider

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codemods.api import positions
from codemods.api import rule as base
from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

Call = tuple[cst.Module, list[cst.CSTNode] | None]  # None: every node (files with suppressions)


def record_calls(paths: list[str]) -> tuple[list[Call], float, float]:
    """Run the engine over `paths`; the node_positions calls it made, its CPU time and theirs."""
    files = sorted(str(p) for root in paths for p in Path(root).rglob("*.py"))
    ruleset = RuleSet(select_rules(all_rules(), (), (), ()))
    calls: list[Call] = []
    spent = 0.0
    real = base.node_positions

    def recording(module: cst.Module, nodes: Iterable[cst.CSTNode] | None) -> dict[int, tuple[int, int]]:
        nonlocal spent
        asked = list(nodes) if nodes is not None else None
        calls.append((module, asked))
        started = time.process_time()
        try:
            return real(module, asked)
        finally:
            spent += time.process_time() - started

    base.node_positions = recording  # type: ignore[assignment]
    started = time.process_time()
    try:
        for path in files:
            migrate_text(Path(path).read_text(encoding="utf-8", errors="replace"), path, ruleset)
    finally:
        base.node_positions = real
    return calls, time.process_time() - started, spent


def _node_of(module: cst.Module, key: int) -> cst.CSTNode | None:
    return _nodes_by_id(module).get(key)


_BY_ID: dict[int, dict[int, cst.CSTNode]] = {}


def _nodes_by_id(module: cst.Module) -> dict[int, cst.CSTNode]:
    if id(module) not in _BY_ID:
        ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        _BY_ID[id(module)] = {id(node): node for node in ranges}
    return _BY_ID[id(module)]


def via_byte_spans(module: cst.Module, nodes: list[cst.CSTNode] | None) -> dict[int, tuple[int, int]]:
    spans = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ByteSpanPositionProvider)
    data = module.code.encode("utf-8")
    line_starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    result = {}
    for node in spans if nodes is None else nodes:
        offset = spans[node].start
        line = bisect_right(line_starts, offset)
        start = line_starts[line - 1]
        result[id(node)] = (line, len(data[start:offset].decode("utf-8")) + 1)
    return result


def via_position_provider(module: cst.Module, nodes: list[cst.CSTNode] | None) -> dict[int, tuple[int, int]]:
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {id(node): (ranges[node].start.line, ranges[node].start.column + 1)
            for node in (ranges if nodes is None else nodes)}


def main() -> None:
    import torch

    torch_root = os.path.dirname(torch.__file__)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*",
                        default=[os.path.join(torch_root, d) for d in ("cuda", "amp", "distributed", "utils")])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    calls, engine_cpu, positions_cpu = record_calls(args.paths)
    ours_fn = positions.node_positions
    mismatches = 0
    for module, nodes in calls:  # an IndentedBlock starts where its header ends (PositionProvider:
        ours = ours_fn(module, nodes)  # at its first statement), so blocks are left out here
        expected = via_position_provider(module, nodes)
        mismatches += sum(expected[key] != position for key, position in ours.items()
                          if not isinstance(_node_of(module, key), cst.IndentedBlock))
    ways = {"ours": ours_fn, "ByteSpanPositionProvider": via_byte_spans,
            "PositionProvider": via_position_provider}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, way in ways.items():
            started = time.process_time()
            for module, nodes in calls:
                way(module, nodes)
            times[name].append(time.process_time() - started)
    print(f"{len(calls)} node_positions calls; engine CPU {engine_cpu:.2f} s, of which positions "
          f"{positions_cpu:.3f} s ({100 * positions_cpu / engine_cpu:.1f}%); "
          f"{mismatches} positions differ from PositionProvider")
    base_time = statistics.median(times["ours"])
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"  {name:26} median {median:.3f} s CPU  ({median / base_time:.2f}x ours; "
              f"{100 * (median - base_time) / engine_cpu:+.1f}% of engine CPU)")


if __name__ == "__main__":
    main()
