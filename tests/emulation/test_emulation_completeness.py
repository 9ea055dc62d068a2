"""Every torch.npu / torch_npu name that `apply` can write exists in the emulation.

The names come from the codemods' own mapping tables (codemods/data/*.json: the `npu` side of every
'rewrite' entry, and torch_npu.npu.__all__ as listed in torch_cuda.json), so a rule that starts
emitting a new name fails here until the emulation has it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from npu_migrate import emulation

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "codemods" / "data"
NAME = re.compile(r"\b(torch\.npu|torch_npu)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _rewrite_targets(node, found: set[str]) -> None:
    if isinstance(node, dict):
        if node.get("action") == "rewrite" and isinstance(node.get("npu"), str):
            for match in NAME.finditer(node["npu"]):
                found.add(match.group(1) + match.group(2))
        for value in node.values():
            _rewrite_targets(value, found)
    elif isinstance(node, list):
        for value in node:
            _rewrite_targets(value, found)


def emitted_names() -> list[str]:
    found: set[str] = set()
    for path in sorted(DATA.glob("*.json")):
        _rewrite_targets(json.loads(path.read_text()), found)
    listed = json.loads((DATA / "torch_cuda.json").read_text())["torch_npu_npu_all"]
    for names in listed.values():
        found.update(f"torch.npu.{name}" for name in names)
    return sorted(found)


def _resolve(dotted: str) -> object:
    import torch_npu

    head, _, rest = dotted.partition(".") if dotted.startswith("torch_npu") else ("torch", "", dotted[6:])
    obj = torch_npu if head == "torch_npu" else torch
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_tables_name_many_npu_names():
    names = emitted_names()
    assert len(names) > 150 and "torch.npu.utilization" in names and "torch.npu.NPUGraph" in names


def test_every_emitted_name_exists_in_the_emulation():
    with emulation.emulated():
        missing = []
        for name in emitted_names():
            try:
                _resolve(name)
            except AttributeError:
                missing.append(name)
    assert missing == [], f"apply can emit names the emulation lacks: {missing}"


def test_aliases_keep_their_own_names():
    with emulation.emulated():
        assert torch.npu.default_stream() == torch.npu.current_stream()
        assert torch.npu.seed_all.__name__ == "seed" and callable(torch.npu.seed_all)
        from torch.npu import (
            graphs,
            memory,  # noqa: F401 - the submodule imports by name
            random,
        )

        assert graphs.NPUGraph is torch.npu.NPUGraph and random.manual_seed is torch.npu.manual_seed


def test_utilization_snapshot_and_cached_memory():
    with emulation.emulated():
        x = torch.ones(1024, device="npu")
        assert torch.npu.utilization() == 0
        assert torch.npu.max_memory_cached() >= x.numel() * 4
        assert isinstance(torch.npu.memory_snapshot(), list)
        assert torch.npu.FloatTensor([1, 2]).dtype == torch.float32
        assert torch.npu.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"] >= 4096


def test_npu_graph_replays_on_the_captured_tensors():
    with emulation.emulated():
        static_in = torch.ones(3, device="npu")
        graph = torch.npu.NPUGraph()
        with torch.npu.graph(graph):
            static_out = static_in * 2 + 1
        assert static_out.tolist() == [3.0, 3.0, 3.0]
        static_in.copy_(torch.tensor([1.0, 2.0, 3.0]))
        graph.replay()
        assert static_out.tolist() == [3.0, 5.0, 7.0]


def test_unsupported_feature_raises_naming_itself():
    with emulation.emulated(), pytest.raises(emulation.EmulationError, match="obfuscation_initialize"):
        torch.npu.obfuscation_initialize()


def test_generator_event_and_profiler_accept_npu():
    with emulation.emulated():
        generator = torch.Generator(device="npu")
        generator.manual_seed(3)
        first = torch.randn(4, generator=generator, device="npu")
        generator.manual_seed(3)
        assert torch.equal(first, torch.randn(4, generator=generator, device="npu"))
        assert isinstance(torch.default_generator, torch.Generator)
        event = torch.Event("npu")
        event.record()
        with torch.autograd.profiler.profile(use_device="npu") as prof:
            torch.ones(2, device="npu").add(1)
        assert any("add" in e.name for e in prof.function_events)


def test_barrier_after_an_hccl_init(tmp_path):
    import torch.distributed as dist

    with emulation.emulated():
        dist.init_process_group("hccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
        try:
            dist.barrier()
            tensor = torch.ones(2, device="npu")
            dist.all_reduce(tensor)
            assert tensor.tolist() == [1.0, 1.0]
        finally:
            dist.destroy_process_group()
