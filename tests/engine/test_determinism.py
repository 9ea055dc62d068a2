"""Rule state is scoped by construction: the same input gives the same output every time, in one
process, across processes, and for identical copies in one run (issue 13, defect 1).

Rules used to remember nodes by `id()` for a whole file while each statement is parsed into its
own tree; once a tree is freed its addresses are reused, so a later statement's node could be
mistaken for an earlier one and a use was silently left unmigrated."""

import gc
import glob
import os
import subprocess
import sys

import pytest

from codemods.api.registry import builtin_rules
from npu_migrate.apply.engine import RuleSet, migrate_text
from npu_migrate.apply.runner import RunPlan, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USES = 201


def visible_devices_file(uses=USES):
    """Reads and writes of CUDA_VISIBLE_DEVICES, each in its own statement (its own tree)."""
    lines = ["import os\n", "import torch\n", "from torch.distributed import is_nccl_available\n"]
    for index in range(uses):
        # rules that remember nodes of one statement: attribute names, vetoed callees
        lines.append(f"a{index} = torch.distributed.is_nccl_available() or is_nccl_available()\n")
        lines.append(f"torch.cuda.nvtx.range('step %d', {index})\n")
        lines.append(f"pg{index} = torch.distributed.ProcessGroupNCCL\n")
        lines.append(f"sources{index} = ['kernel{index}.cu']\n")
        if index % 3 == 0:
            lines.append(f'os.environ["CUDA_VISIBLE_DEVICES"] = "{index % 8}"\n')
        elif index % 3 == 1:
            lines.append(f'print(os.environ["CUDA_VISIBLE_DEVICES"], {index})\n')
        else:
            lines.append(f'v{index} = os.environ.get("CUDA_VISIBLE_DEVICES")\n')
    lines.append("t = torch.backends.cuda.cufft_plan_cache[0]\n")
    lines.append("print(torch.backends.cuda.cufft_plan_cache.max_size)\n")
    return "".join(lines)


def every_rule():
    return RuleSet(list(builtin_rules()))


def _churn():
    """Free and allocate many small objects so that addresses of freed trees are reused."""
    junk = [[object() for _ in range(50)] for _ in range(200)]
    del junk
    gc.collect()


def test_every_visible_devices_use_is_migrated_every_time():
    text = visible_devices_file()
    outputs = set()
    for _ in range(12):
        outcome = migrate_text(text, "env.py", every_rule())
        assert outcome.error is None
        outputs.add(outcome.new_text)
        assert sum(d.code == "NPU311" for d in outcome.diagnostics) == USES  # one per .cu list
        _churn()
    assert len(outputs) == 1
    (migrated,) = outputs
    assert migrated.count("ASCEND_RT_VISIBLE_DEVICES") == USES
    assert "CUDA_VISIBLE_DEVICES" not in migrated and "is_nccl_available()" not in migrated


def _fixture_sources():
    paths = sorted(glob.glob(os.path.join(ROOT, "fixtures", "**", "*.py"), recursive=True))
    return [(os.path.relpath(p, ROOT), open(p, encoding="utf-8").read()) for p in paths]


def test_every_rule_on_every_fixture_is_repeatable_in_one_process():
    ruleset = every_rule()
    sources = _fixture_sources() + [("env.py", visible_devices_file(60))]
    first = {path: migrate_text(text, path, ruleset) for path, text in sources}
    for _ in range(3):
        _churn()
        for path, text in sources:
            again = migrate_text(text, path, ruleset)
            assert (again.new_text, again.edits, again.diagnostics, again.error) == (
                first[path].new_text, first[path].edits, first[path].diagnostics, first[path].error), path


_CHILD = """
import sys
from codemods.api.registry import builtin_rules
from npu_migrate.apply.engine import RuleSet, migrate_text
sys.path.insert(0, sys.argv[1])
from test_determinism import visible_devices_file
out = migrate_text(visible_devices_file(), "env.py", RuleSet(list(builtin_rules())))
sys.stdout.write(out.new_text)
"""


def test_output_is_the_same_across_processes():
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONHASHSEED="random")
    here = os.path.dirname(os.path.abspath(__file__))
    outputs = {subprocess.run([sys.executable, "-c", _CHILD, here], env=env, capture_output=True,
                              text=True, timeout=120, check=True).stdout for _ in range(3)}
    assert len(outputs) == 1
    assert outputs.pop() == migrate_text(visible_devices_file(), "env.py", every_rule()).new_text


@pytest.mark.parametrize("jobs", [1, 2])
def test_identical_copies_in_one_run_migrate_identically(tmp_path, jobs):
    text = visible_devices_file(40)
    paths = []
    for index in range(30):
        path = tmp_path / f"copy{index:02}.py"
        path.write_text(text)
        paths.append(str(path))
    plan = RunPlan([r.code for r in builtin_rules()])
    results = list(run(paths, plan, jobs=jobs))
    outputs = {r.outcome.new_text for r in results}
    assert len(outputs) == 1
    assert outputs.pop().count("ASCEND_RT_VISIBLE_DEVICES") == 40
