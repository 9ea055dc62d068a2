"""A real torch training loop on CPU, profiled and turned into a snapshot by PyTorch's own
`_profile_to_snapshot`: realistic frames and ground-truth categories."""

from __future__ import annotations

import pickle
import warnings
from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from npu_migrate.memory.loader import load_snapshot  # noqa: E402
from npu_migrate.memory.model import ALLOC  # noqa: E402
from npu_migrate.memory.replay import replay  # noqa: E402
from npu_migrate.memory.report import analyze  # noqa: E402
from npu_migrate.memory.sites import SiteTable  # noqa: E402
from .reference import load_raw, replay as reference_replay  # noqa: E402


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    from torch.cuda._memory_viz import _profile_to_snapshot
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=True) as prof:
            for _ in range(3):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        snapshot = _profile_to_snapshot(prof)
    path = tmp_path_factory.mktemp("prof") / "profile_snapshot.pickle"
    with open(path, "wb") as handle:
        pickle.dump(snapshot, handle)
    return path


def test_replay_matches_reference(profiled):
    raw = load_raw(profiled)
    snap = load_snapshot(profiled)
    device = next(d for d, t in enumerate(raw["device_traces"]) if t)
    ref = reference_replay(raw, device)
    rep = replay(snap, device)
    assert rep.allocated.tolist() == ref["allocated"]
    assert rep.peak_bytes == ref["peak"] > 0
    # the profile's "path(line): function" frames are split into real frames
    sites = SiteTable(snap.stacks)
    assert any(f[1].endswith("torch/optim/adam.py") and f[2] > 0 for s in snap.stacks for f in s)
    assert "test_profile_snapshot.py" in sites.site(int(rep.trace.stack[0]))


def test_categories_from_the_producer_and_from_frames_agree(profiled):
    raw = load_raw(profiled)
    snap = load_snapshot(profiled)
    device = next(d for d, t in enumerate(raw["device_traces"]) if t)
    report, _ = analyze(snap)
    table = next(t for t in report.tables if "by category" in t.title)
    assert "from the producer" in table.title
    trace = snap.traces[device]
    sites = SiteTable(snap.stacks)
    truth = [e.get("category") for e in raw["device_traces"][device] if e["action"] == "alloc"]
    ours = [sites.category(int(s)) for s, a in zip(trace.stack, trace.action) if a == ALLOC]
    pairs = Counter(zip(truth, ours))
    # where the frames are unambiguous the stack rules match the profiler's data-flow labels
    assert pairs[("optimizer_state", "optimizer_state")] == truth.count("optimizer_state") > 0
    grads = sum(n for (t, o), n in pairs.items() if t in ("gradient", "autograd_detail"))
    assert sum(pairs[(t, "gradient")] for t in ("gradient", "autograd_detail")) >= 0.9 * grads
