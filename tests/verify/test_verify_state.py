"""Script mode sees state that no op outputs (issue 26, item 3): module modes, autocast regions,
batch-norm running statistics, what the script saves, the optimizer's final state, and peak memory
with its budgets. Each fault is put into a real migrated script and must be reported at the line
that made it (the `eval()`, the `with torch.autocast(...)`, the constructor, the `torch.save`, the
hook registration), not at the first op it changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main as cli_main
from npu_migrate.verify.script import ScriptOptions, verify_script

TRAIN = """\
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cuda")
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
kept = []
for step in range(3):
    model.train()
    x = torch.randn(64, 8).to(device)
    y = torch.randint(0, 2, (64,)).to(device)
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        val = model(x).sum()
    print(f"step {step} loss {loss.item():.4f}")
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": 3}, "ckpt.pt")
"""

# name: (text in the migrated script, replacement, the migrated line the finding must name)
FAULTS = {
    "eval_never_undone": ("    model.train()\n", "    model.eval()\n", 11),
    "autocast_region": ("    out = model(x)\n",
                        "    with torch.autocast(\"npu\", dtype=torch.bfloat16):\n        out = model(x)\n", 14),
    "batchnorm_momentum": ("nn.BatchNorm1d(16)", "nn.BatchNorm1d(16, momentum=0.01)", 7),
    "checkpoint_in_half": ('{"model": model.state_dict(),',
                           '{"model": {k: v.half() for k, v in model.state_dict().items()},', 23),
}
HOOK = ("kept = []\n", "kept = []\nfor layer in model.modules():\n"
        "    layer.register_forward_hook(lambda module, args, output: kept.append(output))\n", 11)


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    original = tmp_path / "original"
    original.mkdir()
    (original / "train.py").write_text(TRAIN)
    migrated = tmp_path / "migrated"
    result = CliRunner().invoke(cli_main, ["apply", str(original), "--output-dir", str(migrated), "--no-cache"])
    assert result.exit_code == 0, result.output
    return original, migrated


def _inject(migrated: Path, dest: Path, before: str, after: str) -> Path:
    dest.mkdir()
    text = (migrated / "train.py").read_text()
    assert before in text
    (dest / "train.py").write_text(text.replace(before, after, 1))
    return dest


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One reference and noise run shared by the clean migration and every fault."""
    tmp_path = tmp_path_factory.mktemp("state")
    original, migrated = _trees(tmp_path)
    cache: dict = {}

    def run(tree: Path, **options) -> object:
        return verify_script(ScriptOptions(original, tree, "train.py", steps=3, timeout=180, **options), cache)

    return tmp_path, migrated, run


def test_the_clean_migration_passes_with_equal_peaks(runs):
    _, migrated, run = runs
    outcome = run(migrated, max_peak_ratio=1.05)
    assert outcome.verdict == "pass", outcome.reason
    memory = outcome.data["memory"]
    assert memory["measured"] and memory["reference_peak"] > 0
    assert memory["ratio"] == pytest.approx(1.0, abs=0.02), memory
    document = json.loads(json.dumps(outcome.to_dict(), default=str))
    assert {"reference_peak", "migrated_peak", "ratio"} <= set(document["memory"])


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_state_fault_is_blamed_on_the_line_that_made_it(runs, fault):
    tmp_path, migrated, run = runs
    before, after, line = FAULTS[fault]
    outcome = run(_inject(migrated, tmp_path / fault, before, after))
    assert outcome.verdict == "fail", outcome.reason
    assert f"train.py:{line}" in outcome.sites(), (outcome.sites(), outcome.reason)
    first = outcome.comparison.first
    if fault == "eval_never_undone":  # the eval() call, not the dropout it turns off
        assert (first.kind, first.site) == ("mode", "train.py:11") and "eval mode" in first.reason, first
    if fault == "autocast_region":  # the `with`, not the first matmul it lowers
        assert (first.kind, first.site) == ("precision", "train.py:14"), first


def test_a_hook_that_keeps_activations_breaks_the_memory_budget_at_its_registration(runs):
    tmp_path, migrated, run = runs
    tree = _inject(migrated, tmp_path / "hook", *HOOK[:2])
    outcome = run(tree, max_peak_ratio=1.2)
    assert outcome.verdict == "fail", outcome.reason
    assert outcome.data["memory"]["ratio"] > 1.2
    codes = {(d.code, d.line) for d in outcome.findings()}
    assert ("VER003", HOOK[2]) in codes, outcome.findings()
    assert run(tree).verdict == "pass"  # no budget: the peak is reported, not judged


def test_no_memory_with_a_budget_is_refused_in_one_line(tmp_path):
    original, migrated = _trees(tmp_path)
    result = CliRunner().invoke(cli_main, ["verify", "--original", str(original), "--migrated", str(migrated),
                                           "--no-memory", "--max-peak-ratio", "1.2", "--", "train.py"])
    assert result.exit_code == 2
    assert "--no-memory" in result.output and "Traceback" not in result.output




def _event(kind: str, seq: int, site: str, **fields) -> dict:
    return {"kind": kind, "seq": seq, "site": site, "step": -1, "name": fields.pop("name", kind), **fields}


def test_autocast_regions_compare_by_device_kind_and_dtype_and_skip_disabled_ones():
    from npu_migrate.verify.statecompare import region_divergence

    def same_line(site):
        return site

    cuda = [_event("region", 3, "t.py:9", device="cuda", dtype="float16", enabled=True)]
    npu = [_event("region", 4, "t.py:9", device="npu", dtype="float16", enabled=True)]
    assert region_divergence(cuda, npu, lambda seq: seq, float("inf"), same_line) is None
    disabled = npu + [_event("region", 5, "t.py:12", device="npu", dtype="bfloat16", enabled=False)]
    assert region_divergence(cuda, disabled, lambda seq: seq, float("inf"), same_line) is None
    lowered = [_event("region", 4, "t.py:9", device="npu", dtype="bfloat16", enabled=True)]
    found = region_divergence(cuda, lowered, lambda seq: seq, float("inf"), same_line)
    assert (found.kind, found.site, found.seq) == ("precision", "t.py:9", 4)


def test_a_mode_change_only_the_original_makes_is_placed_where_the_migrated_run_stands():
    from npu_migrate.verify.statecompare import mode_divergence

    original = [_event("mode", 7, "t.py:20", name="eval", value=False, **{"class": "Net"})]
    found = mode_divergence(original, [], lambda seq: seq + 0.5, float("inf"), lambda site: "t.py:21")
    assert (found.site, found.reference_site, found.seq) == (None, "t.py:20", 7.5)
    assert "the migrated code does not" in found.reason
    assert mode_divergence(original, [], lambda seq: 100.0, 50.0, lambda site: site) is None  # it raised before


def test_hooks_only_the_migrated_code_registers_are_the_memory_suspects():
    from npu_migrate.verify.statecompare import new_hooks

    hook = {"name": "Module.register_forward_hook", "class": "Linear"}
    original = [_event("hook", 1, "t.py:5", **hook)]
    migrated = [_event("hook", 1, "t.py:6", **hook), _event("hook", 2, "t.py:7", **hook)]
    assert [e["site"] for e in new_hooks(original, migrated)] == ["t.py:7"]


def test_live_bytes_count_a_storage_until_its_last_view_goes():
    import gc

    import torch

    from npu_migrate.verify.statecapture import LiveBytes

    meter = LiveBytes()
    base = torch.zeros(1000)
    meter.produced(base, "t.py:3")
    meter.produced(base.add_(1), "t.py:4")  # in place: the same storage, counted once
    view = base[:10]
    del base
    gc.collect()
    assert meter.current == 4000  # the view keeps the storage alive
    del view
    gc.collect()
    assert (meter.current, meter.peak, meter.result()["by_site"]) == (0, 4000, {"t.py:3": 4000})
    meter.produced(torch.zeros(4, 4).to_sparse(), "t.py:9")
    assert meter.current == 0
