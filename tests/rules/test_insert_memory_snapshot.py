"""NPU420 `memory-snapshot`: env-switched memory history at the program entry, step markers."""

import json
import os
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest
import rule_cases


ROOT = Path(__file__).resolve().parents[2]


def migrate(src: str, options=None):
    return rule_cases.migrate(dedent(src), ["NPU100"], "train.py", enable=["memory-snapshot"], options=options)


def after(src: str, options=None) -> str:
    outcome = migrate(src, options)
    return outcome.new_text if outcome.new_text is not None else dedent(src)


SCRIPT = """\
    import sys

    import torch


    def main(fail_at):
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in torch.randn(3, 8, 4):
            loss = model(x).pow(2).mean()
            if fail_at == len(STEPS):
                raise RuntimeError("the training step failed")
            STEPS.append(loss.item())
            loss.backward()
            optimizer.step()


    STEPS = []
    if __name__ == "__main__":
        main(int(sys.argv[1]))
    """

SCRIPT_EXPECTED = """\
    import sys

    import torch
    import torch_npu  # noqa: F401
    import atexit
    import os


    def main(fail_at):
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for npu_migrate_step, x in enumerate(torch.randn(3, 8, 4)):
            with torch.profiler.record_function(f"ProfilerStep#{npu_migrate_step}"): pass  # step marker (npu-migrate)
            loss = model(x).pow(2).mean()
            if fail_at == len(STEPS):
                raise RuntimeError("the training step failed")
            STEPS.append(loss.item())
            loss.backward()
            optimizer.step()


    STEPS = []
    if __name__ == "__main__":
        if os.environ.get("NPU_MIGRATE_SNAPSHOT"):  # memory snapshot (npu-migrate)
            torch_npu.npu.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=100000)
            atexit.register(torch_npu.npu.memory._dump_snapshot,
                os.environ["NPU_MIGRATE_SNAPSHOT"].replace("{rank}", os.environ.get("RANK", "0")))
        main(int(sys.argv[1]))
    """


# The sources the rule leaves alone are CASES of NPU420 (in its rule module: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_inserted_text_and_idempotence():
    outcome = migrate(SCRIPT)
    assert outcome.new_text == dedent(SCRIPT_EXPECTED)
    assert [(e.code, e.line) for e in outcome.edits if e.code == "NPU420"] == [("NPU420", 9), ("NPU420", 19)]
    assert after(SCRIPT_EXPECTED) == dedent(SCRIPT_EXPECTED)


def test_options_rename_the_variable_and_bound_the_history():
    text = after(SCRIPT, {"snapshot_env": "SNAP", "snapshot_max_entries": 5000})
    assert 'os.environ.get("SNAP")' in text and "max_entries=5000" in text


def test_imported_torch_npu_alias_and_transfer_to_npu_are_used():
    src = """\
    import torch
    import torch_npu as tn

    if __name__ == '__main__':
        model = torch.nn.Linear(2, 2).eval()
    """
    text = after(src)
    assert "tn.npu.memory._record_memory_history(" in text and "import torch_npu\n" not in text
    src2 = src.replace("import torch_npu as tn", "from torch_npu.contrib import transfer_to_npu")
    text2 = after(src2)
    assert "torch.npu.memory._dump_snapshot" in text2 and "import torch_npu" not in text2


def test_two_space_indentation_and_a_while_loop_counter():
    src = """\
    import torch
    def train(model, opt):
      \"\"\"Train until done.\"\"\"
      done = False
      while not done:
        loss = model()
        loss.backward()
        opt.step()
        done = True
    if __name__ == "__main__":
      train(m, o)
    """
    assert after(src) == dedent("""\
    import torch
    import torch_npu  # noqa: F401
    import atexit
    import os
    def train(model, opt):
      \"\"\"Train until done.\"\"\"
      npu_migrate_step = 0
      done = False
      while not done:
        with torch.profiler.record_function(f"ProfilerStep#{npu_migrate_step}"): npu_migrate_step += 1  # step marker (npu-migrate)
        loss = model()
        loss.backward()
        opt.step()
        done = True
    if __name__ == "__main__":
      if os.environ.get("NPU_MIGRATE_SNAPSHOT"):  # memory snapshot (npu-migrate)
        torch_npu.npu.memory._record_memory_history(
          enabled="all", context="all", stacks="python", max_entries=100000)
        atexit.register(torch_npu.npu.memory._dump_snapshot,
          os.environ["NPU_MIGRATE_SNAPSHOT"].replace("{rank}", os.environ.get("RANK", "0")))
      train(m, o)
    """)


def test_a_training_file_without_entry_point_is_reported():
    outcome = migrate("import torch\nfor x in data:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n")
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU420", 4)]
    assert "__main__" in outcome.diagnostics[0].message
    assert "ProfilerStep" in outcome.new_text  # the loop is still marked


# -- the inserted code at run time, against a fake torch_npu with its real signatures ---------------

FAKE_TORCH_NPU = '''\
"""A stand-in for torch_npu: the memory-history API with torch_npu's signatures, logging calls."""
import json, os, pickle, sys, types
import torch

def _log(**entry):
    with open(os.environ["FAKE_NPU_LOG"], "a") as handle:
        handle.write(json.dumps(entry) + "\\n")

def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None):
    if isinstance(enabled, bool):  # torch_npu has no legacy bool form: pybind rejects it
        raise TypeError("_record_memory_history(): incompatible function arguments")
    _log(call="_record_memory_history", enabled=enabled, context=context, stacks=stacks,
         max_entries=max_entries, device=device)

def _dump_snapshot(filename="dump_snapshot.pickle"):
    _log(call="_dump_snapshot", filename=filename)
    with open(filename, "wb") as handle:
        pickle.dump({"segments": [], "device_traces": [[]]}, handle)

memory = types.ModuleType("torch_npu.npu.memory")
memory._record_memory_history, memory._dump_snapshot = _record_memory_history, _dump_snapshot
npu = types.ModuleType("torch_npu.npu")
npu.memory = memory
sys.modules["torch_npu.npu"], sys.modules["torch_npu.npu.memory"] = npu, memory
torch.npu = npu

_real_record_function = torch.profiler.record_function
class _logged_record_function(_real_record_function):
    def __enter__(self):
        _log(call="record_function", name=self.name)
        return super().__enter__()
torch.profiler.record_function = _logged_record_function
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The migrated script run three ways, in parallel: with the variable, with the variable and a
    failing step, without the variable."""
    tmp = tmp_path_factory.mktemp("snapshot")
    (tmp / "torch_npu").mkdir()
    (tmp / "torch_npu" / "__init__.py").write_text(FAKE_TORCH_NPU)
    script = tmp / "train.py"
    script.write_text(after(SCRIPT))
    cases = {"ok": ("99", True), "fail": ("1", True), "off": ("99", False)}
    procs = {}
    for name, (fail_at, snapshot) in cases.items():
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp), str(ROOT)]), RANK="3",
                   FAKE_NPU_LOG=str(tmp / f"{name}.log"))
        env.pop("NPU_MIGRATE_SNAPSHOT", None)
        if snapshot:
            env["NPU_MIGRATE_SNAPSHOT"] = str(tmp / f"{name}_{{rank}}.pickle")
        procs[name] = subprocess.Popen([sys.executable, str(script), fail_at], env=env, cwd=tmp,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=240)
        log = tmp / f"{name}.log"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        results[name] = (proc.returncode, err, calls)
    return tmp, results


def _memory_calls(calls):
    return [c for c in calls if c["call"] != "record_function"]


def test_recording_starts_once_and_dumps_once_at_exit(runs):
    tmp, results = runs
    code, err, calls = results["ok"]
    assert code == 0, err
    assert _memory_calls(calls) == [
        {"call": "_record_memory_history", "enabled": "all", "context": "all", "stacks": "python",
         "max_entries": 100000, "device": None},
        {"call": "_dump_snapshot", "filename": str(tmp / "ok_3.pickle")},
    ]
    assert calls[0]["call"] == "_record_memory_history" and calls[-1]["call"] == "_dump_snapshot"
    markers = [c["name"] for c in calls if c["call"] == "record_function"]
    assert markers == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert (tmp / "ok_3.pickle").exists()
    # the names are what `npu-migrate memory` splits steps on
    from npu_migrate.memory.steps import ANNOTATION_MARKERS

    pattern, stage = ANNOTATION_MARKERS[0]
    assert stage == "START" and all(pattern.search(name) for name in markers)


def test_the_dump_happens_when_the_training_step_raises(runs):
    tmp, results = runs
    code, err, calls = results["fail"]
    assert code != 0 and "the training step failed" in err
    assert [c["call"] for c in _memory_calls(calls)] == ["_record_memory_history", "_dump_snapshot"]
    assert [c["name"] for c in calls if c["call"] == "record_function"] == [
        "ProfilerStep#0", "ProfilerStep#1"]
    assert (tmp / "fail_3.pickle").exists()


def test_inert_without_the_variable(runs):
    tmp, results = runs
    code, err, calls = results["off"]
    assert code == 0, err
    assert _memory_calls(calls) == []
    assert not list(tmp.glob("off*.pickle"))


def test_idempotent_where_torch_is_used_but_never_imported():
    """`torch` used as a free name (a star import or a launcher provides it): adding `import torch`
    for the step marker would let every default rule see `torch.cuda.*` as torch's on the next run,
    so a second run would change the file again (issue 29). The marker uses the name as the file does."""
    from npu_migrate.apply.engine import migrate_source

    src = dedent("""\
        from torch.utils.data import DataLoader

        def train(model, loader, opt):
            for x, y in loader:
                torch.cuda.synchronize()
                loss = model(x)
                loss.backward()
                opt.step()

        if __name__ == '__main__':
            train(None, DataLoader([]), None)
        """)
    once = migrate_source(src, "train.py", enable=["memory-snapshot"])
    assert "ProfilerStep" in once and "_record_memory_history" in once
    assert "import torch\n" not in once
    assert migrate_source(once, "train.py", enable=["memory-snapshot"]) == once
