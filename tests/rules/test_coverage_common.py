"""The shared machinery of the coverage rules: name resolution, imports, chunks, suppression,
the whole default rule set on a realistic script."""

from __future__ import annotations

import ast

import pytest
from rule_cases import codes_at, for_codes

from codemods.families.namemap import name_prefilter
from codemods.model.facts import FileFacts

_RULES = for_codes(with_import=True)
migrate, after, assert_idempotent = _RULES.migrate, _RULES.after, _RULES.assert_idempotent

N = "import torch_npu  # noqa: F401\n"


def test_attribute_assignments_do_not_unbind_torch() -> None:
    src = "import torch\nimport torch as th\ntorch.backends.cudnn.benchmark = True\nth.x = 1\nnvtx = 2\n" \
          "from torch.cuda import nvtx\n"
    aliases = FileFacts.from_tree(ast.parse(src)).aliases
    assert aliases["torch"] == "torch" and aliases["th"] == "torch"
    assert "nvtx" not in aliases  # really rebound by a plain assignment


def test_mixed_from_import_is_split_and_keeps_the_rest() -> None:
    src = ("from torch.profiler import (\n    record_function,  # ranges\n    profile,\n    ProfilerActivity,\n)\n"
           "with profile(activities=[ProfilerActivity.CUDA]):\n    pass\n")
    text = after(src, ["NPU171"])
    assert text == (N + "from torch.profiler import (\n    record_function,  # ranges\n)\n"
                    "from torch_npu.profiler import profile, ProfilerActivity\n"
                    "with profile(activities=[ProfilerActivity.NPU]):\n    pass\n")
    assert_idempotent(src, ["NPU171"])


def test_split_import_inside_a_function() -> None:
    src = ("def run():\n    x = 1\n    from torch.profiler import profile, record_function\n"
           "    with profile():\n        pass\n")
    text = after(src, ["NPU171"])
    assert "    from torch.profiler import record_function\n    from torch_npu.profiler import profile\n" in text


def test_plain_import_of_a_submodule_binds_torch() -> None:
    src = "import torch.cuda.nvtx\ntorch.cuda.nvtx.range_start('a')\n"
    # (the engine puts `import torch_npu` before a first torch import that is not `import torch`)
    assert after(src, ["NPU170"]) == N + "import torch.cuda.nvtx\ntorch_npu.npu.mstx.range_start('a')\n"


def test_existing_torch_npu_alias_is_used() -> None:
    src = "import torch_npu as tnpu\nimport torch.cuda.nvtx\ntorch.cuda.nvtx.mark('a')\n"
    assert after(src, ["NPU170"]).endswith("tnpu.npu.mstx.mark('a')\n")


def test_rewrite_in_a_nested_function_statement() -> None:
    src = "import torch\n\n\ndef step():\n    x = 1\n    torch.cuda.nvtx.mark('a')\n    return x\n"
    assert after(src, ["NPU170"]) == ("import torch\n" + N + "\n\ndef step():\n    x = 1\n"
                                      "    torch_npu.npu.mstx.mark('a')\n    return x\n")


def test_suppressed_line_is_left_alone() -> None:
    src = "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True  # npu-migrate: ignore[NPU160]\n"
    outcome = migrate(src, ["NPU160"])
    assert outcome.new_text is None


def test_local_names_that_look_like_imports_are_not_touched() -> None:
    src = ("from torch.cuda import nvtx\n\n\ndef f(obj):\n    obj.nvtx = 1\n    g(nvtx=2)\n    return obj.nvtx\n")
    outcome = migrate(src, ["NPU170"])
    assert outcome.new_text.endswith("def f(obj):\n    obj.nvtx = 1\n    g(nvtx=2)\n    return obj.nvtx\n")
    assert outcome.diagnostics == []


@pytest.mark.parametrize("code,file", [("NPU150", "coverage_tensors.json"), ("NPU160", "coverage_backends.json"),
                                       ("NPU170", "coverage_profiler.json")])
def test_prefilter_matches_every_name_it_handles(code: str, file: str) -> None:
    import re

    from rule_cases import data
    pattern = re.compile(name_prefilter(file, code))
    for entry in data(file)["entries"]:
        if entry["code"] == code and entry.get("match", "name") == "name":
            assert pattern.search(f"x = {entry['cuda']}"), entry["cuda"]
            assert pattern.search(f"from {entry['cuda'].rpartition('.')[0]} import {entry['cuda'].rpartition('.')[2]}")
    assert not pattern.search("x = y + 1\n")


SCRIPT = '''"""A small CUDA training script."""
import argparse

import torch
import torch.backends.cudnn as cudnn
from torch.cuda import nvtx
from torch.profiler import ProfilerActivity, profile

DEVICE = "cuda"

cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True


def main():
    x = torch.cuda.FloatTensor(8).to(DEVICE)
    torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=100000)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        nvtx.range_start("step")
    if torch.cuda.get_device_capability()[0] >= 8:
        x = x.half()
    g = torch.cuda.CUDAGraph()
    model = torch.compile(Net(), backend="cudagraphs")
    state = torch.load("ckpt.pt", map_location={"cuda:1": "cuda:0"})
    return x, g, model, state
'''


def test_a_whole_script_with_the_default_rules() -> None:
    outcome = migrate(SCRIPT)
    text = outcome.new_text
    for expected in ('import torch\nimport torch_npu  # noqa: F401\n',
                     'from torch_npu.npu import mstx as nvtx\n', 'from torch_npu.profiler import ProfilerActivity, profile\n',
                     'DEVICE = "npu"\n', 'torch.npu.matmul.allow_hf32 = True\n',
                     'x = torch.npu.FloatTensor(8).to(DEVICE)\n',
                     'torch.npu.memory._record_memory_history("all", max_entries=100000)\n',
                     '[ProfilerActivity.CPU, ProfilerActivity.NPU]', 'g = torch.npu.NPUGraph()\n',
                     'backend="npugraphs"', '{"cuda:1": "npu:0", "npu:1": "npu:0"}'):
        assert expected in text, expected
    assert "cudnn.benchmark" not in text  # NPU161 removes the no-op flag
    found = {code for code, _ in codes_at(outcome)} | {edit.code for edit in outcome.edits}
    assert {"NPU161", "NPU176", "NPU180"} <= found
    assert_idempotent(SCRIPT)


def test_one_import_split_by_several_rules() -> None:
    """`from torch.cuda import ...` holding names of NPU120, NPU150, NPU170, NPU176 and a name
    with no counterpart: every moved name lands on a line of its own, none is lost."""
    src = ("import torch\nfrom torch.cuda import CUDAGraph, graph, synchronize, nvtx, FloatTensor, jiterator\n"
           "g = CUDAGraph()\nsynchronize()\nnvtx.mark('x')\nx = FloatTensor(2)\n")
    text = after(src)
    for line in ("from torch_npu.npu import FloatTensor\n", "from torch_npu.npu import mstx as nvtx\n",
                 "from torch_npu.npu import NPUGraph as CUDAGraph, graph\n", "from torch.npu import synchronize"):
        assert line in text, line
    assert "jiterator" in text  # kept (and reported by NPU121)
    tree = ast.parse(text)
    bound = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    assert {"CUDAGraph", "graph", "synchronize", "nvtx", "FloatTensor", "jiterator"} <= bound
    assert_idempotent(src)
