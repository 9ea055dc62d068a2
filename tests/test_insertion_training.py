"""The insertion rules on a real training loop: an MLP on synthetic data (gradient accumulation
over two micro-batches, clipping, checkpoints, an evaluation pass), trained on CPU through
npu_migrate.emulation before and after `--enable amp,pin-memory,memory-snapshot` (bf16 and fp16).

All runs share one subprocess (importing torch once). Pinning needs an accelerator: the runner
makes `Tensor.pin_memory` an identity that counts its calls, since the emulation (CPU backing) has
no pinned memory of its own; the real torch_npu pins host memory for the NPU.
"""

import itertools
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "insertion"
ENABLE = ["amp", "pin-memory", "memory-snapshot"]

RUNNER = """\
import json, os, runpy, sys
from npu_migrate.emulation import activate
activate()
import torch
pinned = []
torch.Tensor.pin_memory = lambda self, device=None: pinned.append(1) or self
for script, result, snapshot in json.loads(sys.argv[1]):
    os.environ["TRAIN_RESULT"] = result
    os.environ.pop("NPU_MIGRATE_SNAPSHOT", None)
    if snapshot:
        os.environ["NPU_MIGRATE_SNAPSHOT"] = snapshot
    pinned.clear()
    runpy.run_path(script, run_name="__main__")
    with open(result) as handle:
        data = json.load(handle)
    data["pinned"] = len(pinned)
    with open(result, "w") as handle:
        json.dump(data, handle)
"""


def migrate(dtype: str) -> str:
    ruleset = RuleSet(select_rules(all_rules(), select=["NPU100"], enable=ENABLE), {"amp_dtype": dtype})
    outcome = migrate_text((FIXTURES / "train_mlp.py").read_text(), "train_mlp.py", ruleset)
    assert outcome.error is None, outcome.error
    return outcome.new_text


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("training")
    scripts = {"before": (FIXTURES / "train_mlp.py").read_text(), "bf16": migrate("bfloat16"),
               "fp16": migrate("float16")}
    runs = []
    for name, text in scripts.items():
        (tmp / f"{name}.py").write_text(text)
        snapshot = str(tmp / "snapshot_{rank}.pickle") if name == "bf16" else None
        runs.append([str(tmp / f"{name}.py"), str(tmp / f"{name}.json"), snapshot])
    (tmp / "runner.py").write_text(RUNNER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), RANK="0")
    env.pop("NPU_MIGRATE_SNAPSHOT", None)
    done = subprocess.run([sys.executable, str(tmp / "runner.py"), json.dumps(runs)], cwd=tmp,
                          capture_output=True, text=True, timeout=400, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {name: json.loads((tmp / f"{name}.json").read_text()) for name in scripts}
    return tmp, scripts, results


def test_inserted_code_matches_the_expected_text(trained):
    _, scripts, _ = trained
    assert scripts["bf16"] == (FIXTURES / "train_mlp.bf16.expected").read_text()
    assert scripts["fp16"] == (FIXTURES / "train_mlp.fp16.expected").read_text()
    for dtype, name in (("bfloat16", "bf16"), ("float16", "fp16")):  # applying twice adds nothing
        ruleset = RuleSet(select_rules(all_rules(), select=["NPU100"], enable=ENABLE), {"amp_dtype": dtype})
        assert migrate_text(scripts[name], "train_mlp.py", ruleset).new_text is None


def _falls(losses):
    return len(losses) >= 3 and all(b < a for a, b in itertools.pairwise(losses)) and losses[-1] < 0.6 * losses[0]


def test_loss_falls_before_and_after(trained):
    _, _, results = trained
    for name in ("before", "bf16", "fp16"):
        assert _falls(results[name]["losses"]), (name, results[name]["losses"])
        assert results[name]["accuracy"] > 0.7, (name, results[name])
    # same seed, same data: mixed precision follows the fp32 curve closely
    for name in ("bf16", "fp16"):
        assert results[name]["losses"][-1] == pytest.approx(results["before"]["losses"][-1], rel=0.05)


def test_autocast_really_ran_in_the_chosen_precision(trained):
    _, _, results = trained
    assert results["before"]["dtypes"] == ["torch.float32"]
    assert results["bf16"]["dtypes"] == ["torch.bfloat16"]
    assert results["fp16"]["dtypes"] == ["torch.float16"]


def test_scaler_state_is_checkpointed_with_fp16_only(trained):
    _, _, results = trained
    assert results["before"]["checkpoint_keys"] == ["model", "optimizer"]
    assert results["bf16"]["checkpoint_keys"] == ["model", "optimizer"]
    assert results["fp16"]["checkpoint_keys"] == ["model", "optimizer", "scaler"]


def test_batches_are_pinned_after_insertion_only(trained):
    _, _, results = trained
    assert results["before"]["pinned"] == 0
    batches = 4 * 8 + 8  # four epochs of eight batches, one evaluation pass
    assert results["bf16"]["pinned"] == results["fp16"]["pinned"] == 2 * batches  # inputs and labels


def test_snapshot_written_only_where_the_variable_was_set(trained):
    tmp, _, _ = trained
    assert [p.name for p in tmp.glob("*.pickle")] == ["snapshot_0.pickle"]
    with open(tmp / "snapshot_0.pickle", "rb") as handle:
        snapshot = pickle.load(handle)
    assert set(snapshot) >= {"segments", "device_traces"}
    assert snapshot["device_traces"] and snapshot["device_traces"][0]  # the history was recorded
