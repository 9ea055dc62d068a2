"""Memory statistics of the emulated device, checked against hand-computed allocation patterns,
the torch_npu-shaped snapshot, and the `python -m npu_migrate.emulation` runner."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from npu_migrate import emulation
from npu_migrate.verify.peak import cpu_peak, live_bytes

MiB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def emu():
    with emulation.emulated():
        yield sys.modules["torch_npu"]


def test_the_tracker_counts_a_storage_until_its_last_view_goes_by_site():
    """The tracker behind the statistics is also the verifier's meter of the CPU reference (every op
    output, attributed to the user's line): one count per storage, released with the last view."""
    import gc

    from npu_migrate.emulation._memory import CpuMemoryTracker

    sites = iter(["t.py:3"])
    tracker = CpuMemoryTracker(site_of=lambda: next(sites))
    base = torch.zeros(1000)
    tracker.see(base)  # no site given: site_of names it
    tracker.see(base.add_(1), "t.py:4")  # in place: the same storage, counted once
    view = base[:10]
    del base
    gc.collect()
    assert tracker.allocated == 4000  # the view keeps the storage alive
    del view
    gc.collect()
    assert (tracker.allocated, tracker.peak, tracker.at_peak, tracker.by_site) == (0, 4000, {"t.py:3": 4000}, {"t.py:3": 0})
    tracker.see(torch.zeros(4, 4).to_sparse(), "t.py:9")  # no single storage: not counted, no error
    assert tracker.allocated == 0


def test_allocation_pattern_is_counted_exactly(emu):
    torch.npu.reset_peak_memory_stats()
    start = torch.npu.memory_allocated()
    a = torch.empty(MiB, dtype=torch.uint8, device="npu").fill_(1)  # 1 MiB
    b = torch.empty(2 * MiB, dtype=torch.uint8, device="npu")          # 3 MiB live
    del a                                                               # 2 MiB live
    c = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")          # 6 MiB live: the peak
    assert torch.npu.memory_allocated() - start == 6 * MiB
    del b, c
    assert torch.npu.memory_allocated() == start
    assert torch.npu.max_memory_allocated() - start == 6 * MiB
    stats = torch.npu.memory_stats()
    assert stats["allocated_bytes.all.peak"] == torch.npu.max_memory_allocated()


def _linear_step(device: str):
    weight = torch.nn.Linear(2048, 2048, bias=False).to(device)  # 16 MiB
    x = torch.randn(64, 2048, device=device)  # 0.5 MiB
    optimizer = torch.optim.SGD(weight.parameters(), lr=0.1)

    def step():
        optimizer.zero_grad(set_to_none=True)
        y = weight(x)  # 0.5 MiB, alive until the end of the step
        y.sum().backward()  # grad of the weight: 16 MiB
        optimizer.step()  # in place

    return weight, x, step


# hand computation: weight 16 MiB + input 0.5 MiB + output 0.5 MiB + weight gradient 16 MiB
EXPECTED_STEP_PEAK = 33 * MiB


def test_training_step_peak_matches_hand_computation_emulated(emu):
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    _, _, step = _linear_step("npu")
    step()
    peak = torch.npu.max_memory_allocated() - base
    assert abs(peak - EXPECTED_STEP_PEAK) <= 0.1 * EXPECTED_STEP_PEAK, peak / MiB


def test_training_step_peak_matches_hand_computation_profiler():
    weight, x, step = _linear_step("cpu")
    measured = cpu_peak(step, live_bytes([*weight.parameters(), x]))
    assert measured["baseline"] == 16 * MiB + MiB // 2
    assert abs(measured["peak"] - EXPECTED_STEP_PEAK) <= 0.1 * EXPECTED_STEP_PEAK, measured["peak"] / MiB


def test_profiler_peak_of_a_known_pattern():
    def pattern():
        a = torch.empty(MiB, dtype=torch.uint8).fill_(1)
        b = torch.empty(2 * MiB, dtype=torch.uint8)
        del a
        c = torch.empty(4 * MiB, dtype=torch.uint8)
        del b, c

    measured = cpu_peak(pattern)
    assert abs(measured["peak"] - 6 * MiB) <= 0.1 * 6 * MiB
    assert abs(measured["end"]) < 0.01 * MiB


class _BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name} is not a builtin")


def test_snapshot_follows_the_torch_npu_schema(emu, tmp_path):
    with pytest.raises(TypeError):
        torch.npu.memory._record_memory_history(True)  # no legacy bool form on NPU
    with pytest.raises(TypeError):
        torch.npu.memory._record_memory_history("all", clear_history=True)
    torch.npu.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100)
    kept = torch.zeros(1000, device="npu")
    dropped = torch.ones(500, device="npu")
    del dropped
    snapshot = torch.npu.memory._snapshot()
    assert set(snapshot) == {"segments", "device_traces"}
    trace = snapshot["device_traces"][0]
    actions = [entry["action"] for entry in trace]
    assert actions[-3:] == ["alloc", "free_requested", "free_completed"]
    assert all("time_us" not in entry for entry in trace)
    alloc = [e for e in trace if e["action"] == "alloc" and e["size"] == 4000][-1]
    assert any(frame["filename"] == __file__ for frame in alloc["frames"])
    assert any(seg["total_size"] == 4000 and seg["blocks"][0]["state"] == "active_allocated"
               for seg in snapshot["segments"])
    path = tmp_path / "snap.pickle"
    torch.npu.memory._dump_snapshot(str(path))
    loaded = _BuiltinsOnly(io.BytesIO(path.read_bytes())).load()
    assert loaded["device_traces"][0][-1]["action"] == "free_completed"
    torch.npu.memory._record_memory_history(enabled=None)
    del kept


def test_module_runner_runs_the_migrated_fixture():
    script = ROOT / "fixtures" / "verify" / "migrated" / "mlp" / "train.py"
    proc = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", str(script)],
                          capture_output=True, text=True, cwd=script.parent, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("loss ")
    missing = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", "no_such_script.py"],
                             capture_output=True, text=True, timeout=120, check=False)
    assert missing.returncode == 2 and "no_such_script.py" in missing.stderr
