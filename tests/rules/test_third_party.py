"""NPU301-NPU314: CUDA-only third-party code is reported with its NPU route. The calls with an exact
route (catalogue entries whose action is "rewrite") are rewritten: tests/rules/test_attention_routes.py."""

from __future__ import annotations

import pytest
import rule_cases

from codemods.api.registry import all_rules, find_rule, select_rules
from codemods.families.third_party import best_import_entry, entries
from codemods.rules.npu312_cuda_source_file import cu_file_diagnostic
from npu_migrate.apply.engine import RuleSet, migrate_text
from npu_migrate.core.diagnostics import Severity


def run(text: str, select=("NPU3",)):
    outcome = rule_cases.migrate(text, list(select), "x.py")
    assert outcome.new_text is None  # diagnostics only
    return outcome


def found(text: str) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in run(text).diagnostics]


def _import_case(entry: dict) -> str:
    module, _, name = entry["cuda"].rpartition(".")
    return f"from {module} import {name}\n" if module else f"import {entry['cuda']}\n"


@pytest.mark.parametrize("entry", [e for e in entries() if "import" in e["at"] and e.get("code")], ids=lambda e: e["cuda"])
def test_every_import_entry_is_reported_by_its_code(entry: dict) -> None:
    diagnostics = run(_import_case(entry)).diagnostics
    severity = Severity(entry.get("severity", "warning"))
    assert [(d.code, d.line, d.severity) for d in diagnostics] == [(entry["code"], 1, severity)]
    assert entry["message"] in diagnostics[0].message


@pytest.mark.parametrize("entry", [e for e in entries() if "call" in e["at"] and e.get("code") and e["action"] == "flag"],
                         ids=lambda e: e["cuda"])
def test_every_call_entry_is_reported_through_its_module(entry: dict) -> None:
    module, _, name = entry["cuda"].rpartition(".")
    args = '"k", sources=["k.cu"]' if entry.get("when") == "cuda_sources" else ""
    text = f"import {module} as lib\nresult = lib.{name}({args})\n"
    calls = [d for d in run(text).diagnostics if d.line == 2]
    assert [(d.code, d.message) for d in calls] == [(entry["code"], entry["message"])]


@pytest.mark.parametrize("entry", [e for e in entries() if "reference" in e["at"] and e.get("code")], ids=lambda e: e["cuda"])
def test_every_reference_entry_is_reported(entry: dict) -> None:
    head = entry["cuda"].split(".")[0]
    text = f"import {head}\nvalue = {entry['cuda']}\n"
    assert (entry["code"], 2) in found(text)


def test_import_is_reported_once_by_the_most_specific_entry() -> None:
    assert found("from apex.optimizers import FusedAdam, FusedLAMB\n") == [("NPU302", 1), ("NPU302", 1)]
    assert best_import_entry("apex.optimizers.FusedNovoGrad")["cuda"] == "apex.optimizers"
    assert best_import_entry("apex.fp16_utils")["cuda"] == "apex"
    assert best_import_entry("apexx") is None


def test_direct_import_then_call_is_reported_at_the_import_only() -> None:
    text = "from apex.amp import initialize\nmodel, opt = initialize(model, opt, opt_level='O1')\n"
    assert found(text) == [("NPU301", 1)]


def test_module_import_then_call_gets_the_specific_recipe() -> None:
    """(flash-attn's varlen calls, the example before, are rewritten now: NPU305's cases.)"""
    text = "import apex\nmodel, opt = apex.amp.initialize(model, opt, opt_level='O1')\n"
    diagnostics = run(text).diagnostics
    assert [(d.code, d.line) for d in diagnostics] == [("NPU301", 1), ("NPU301", 2)]
    message = diagnostics[1].message
    for fact in ("amp.initialize", "torch.autocast('npu', dtype=torch.float16)", "O2"):
        assert fact in message


def test_varlen_recipe_spells_out_tnd_and_cumulative_lengths() -> None:
    text = "from flash_attn import flash_attn_varlen_func\n"
    message = run(text).diagnostics[0].message
    assert "'TND'" in message and "cu_seqlens_q[1:].tolist()" in message


def test_apex_amp_usage() -> None:
    text = ("from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n"
            "with amp.scale_loss(loss, opt) as scaled:\n    scaled.backward()\n")
    assert found(text) == [("NPU301", 1), ("NPU301", 2), ("NPU301", 3)]


def test_cpp_extension_load_only_with_cuda_sources() -> None:
    text = ("import os\nfrom torch.utils.cpp_extension import load, load_inline\n"
            "a = load('a', sources=['a.cpp'])\n"
            "b = load('b', [os.path.join(here, 'b_kernel.cu')])\n"
            "c = load('c', sources=['c.cpp'], with_cuda=True)\n"
            "d = load_inline('d', cpp_sources=src)\n"
            "e = load_inline('e', cpp_sources=src, cuda_sources=cuda_src)\n")
    assert found(text) == [("NPU311", 4), ("NPU311", 5), ("NPU311", 7)]


def test_setup_py_cuda_extension() -> None:
    text = ("from setuptools import setup\nimport torch.utils.cpp_extension as ext\n"
            "setup(ext_modules=[ext.CUDAExtension('k', ['k.cpp', 'k_cuda.cu'])], cmdclass={'build_ext': ext.BuildExtension})\n")
    assert found(text) == [("NPU311", 3)]


def test_cuda_build_names_through_the_projects_own_wrapper() -> None:
    """ControlNet's vendored mmcv: `CUDA_HOME` and `CUDAExtension` reach the code through mmcv's own
    wrapper (`parrots_wrapper.py`), a local assignment and a re-export; each statement that binds
    or uses them is reported once, and an import or call report is not doubled."""
    text = ("from .parrots_wrapper import (BuildExtension, CppExtension,\n"
            "                              CUDAExtension)\n"
            "def _get_cuda_home():\n"
            "    if TORCH_VERSION == 'parrots':\n"
            "        from parrots.utils.build_extension import CUDA_HOME\n"
            "    else:\n"
            "        from torch.utils.cpp_extension import CUDA_HOME\n"
            "    return CUDA_HOME\n"
            "def _get_extension():\n"
            "    CUDAExtension = partial(Extension, cuda=True)\n"
            "    return BuildExtension, CppExtension, CUDAExtension\n"
            "BuildExtension, CppExtension, CUDAExtension = _get_extension()\n"
            "home = _get_cuda_home()\n"
            "if CUDA_HOME is not None and osp.isdir(CUDA_HOME):\n"
            "    nvcc = osp.join(CUDA_HOME, 'bin/nvcc')\n")
    assert found(text) == [("NPU311", line) for line in (2, 5, 7, 8, 10, 11, 12, 14, 15)]
    import_then_call = ("from torch.utils.cpp_extension import CUDAExtension\n"
                        "import torch.utils.cpp_extension as ext\n"
                        "a = ext.CUDAExtension('k', ['k.cpp'])\n"
                        "b = CUDAExtension('k', ['k.cpp'])\n")
    # line 4 calls the name line 1 imports straight from torch: that import's report names it, as
    # for every other library (reported once, at the import); line 3 goes through a module alias
    assert found(import_then_call) == [("NPU311", 1), ("NPU311", 3)]


def test_channels_last_uses() -> None:
    text = ("import torch\nmodel = model.to(memory_format=torch.channels_last)\n"
            "x = x.contiguous(memory_format=torch.channels_last_3d)\ny = x.contiguous()\n")
    assert found(text) == [("NPU313", 2), ("NPU313", 3)]


def test_channels_last_found_even_after_an_assignment_through_torch() -> None:
    text = "import torch\ntorch.backends.cudnn.benchmark = True\nx = x.to(memory_format=torch.channels_last)\n"
    assert found(text) == [("NPU313", 3)]


NOT_REPORTED = [
    "import torch\nimport torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v)\n",
    "from torch.utils.cpp_extension import CppExtension, BuildExtension\n",
    "from . import apex\nfrom .flash_attn import something\n",  # relative imports are the project's own
    "import apexlib\nimport tritonclient\n",
    "triton = 3\nvalue = triton.jit\n",  # not the triton package
    "import torch\nx = torch.load('model.pt')\n",
    "import torch.nn as nn\nm = nn.parallel.DistributedDataParallel(m)\nbn = nn.SyncBatchNorm(8)\n",
]


@pytest.mark.parametrize("text", NOT_REPORTED)
def test_not_reported(text: str) -> None:
    assert found(text) == []


def test_suppression() -> None:
    text = "import flash_attn  # npu-migrate: ignore[NPU305]\nimport cupy  # npu-migrate: ignore\nimport pynvml\n"
    assert found(text) == [("NPU310", 3)]


def test_selecting_one_code_reports_only_it() -> None:
    text = "import cupy\nimport pynvml\nimport triton\n"
    assert [d.code for d in run(text, select=["NPU309"]).diagnostics] == ["NPU309"]


def test_cu_file_diagnostic() -> None:
    diagnostic = cu_file_diagnostic("csrc/kernel.cu")
    assert (diagnostic.code, diagnostic.path, diagnostic.line, diagnostic.severity) == (
        "NPU312", "csrc/kernel.cu", 0, Severity.WARNING)
    assert "Ascend C" in diagnostic.message
    assert diagnostic.format().endswith("(npu-migrate rules NPU312)")
    assert find_rule("NPU312").name == "cuda-source-file"


def test_engine_reports_cuda_source_files() -> None:
    ruleset = RuleSet(select_rules(all_rules()))
    outcome = migrate_text("__global__ void k(float* x) { x[0] = 1; }\n", "csrc/k.cu", ruleset)
    assert outcome.new_text is None and outcome.error is None
    assert [(d.code, d.path, d.line) for d in outcome.diagnostics] == [("NPU312", "csrc/k.cu", 0)]
    header = migrate_text("#pragma once\n", "csrc/k.cuh", ruleset)
    assert [d.code for d in header.diagnostics] == ["NPU312"]
    ignored = migrate_text("__global__ void k() {}\n", "k.cu",
                           RuleSet(select_rules(all_rules(), ignore=["NPU312"])))
    assert ignored.diagnostics == []


def test_cuda_sources_handed_to_other_calls_and_computed_load_sources() -> None:
    text = ("import os, torch.utils.cpp_extension\n"
            "plugin = custom_ops.get_plugin('bias_act', sources=['bias_act.cpp', 'bias_act.cu'])\n"
            "ext = torch.utils.cpp_extension.load(name=n, sources=cached_sources)\n"
            "ok = torch.utils.cpp_extension.load(name=n, sources=['a.cpp', 'b.cpp'])\n"
            "also = torch.utils.cpp_extension.load('k', [os.path.join(d, 'k.cu')])\n"
            "name = 'kernel.cuda.py'\n")
    diagnostics = run(text).diagnostics
    assert [(d.code, d.line) for d in diagnostics] == [("NPU311", 2), ("NPU311", 3), ("NPU311", 5)]
    assert "`bias_act.cu`" in diagnostics[0].message
    assert "computed" in diagnostics[1].message


def test_cuda_source_lists_and_strings_are_reported_once() -> None:
    text = ("import os\nsources = ['bias_act.cpp', 'bias_act.cu']\nsources = [os.path.join(d, s) for s in sources]\n"
            "kernel = 'csrc/kernel.cuh'\nfiles = ('a.cu', 'b.cu')\ndoc = 'see kernel.cu.txt'\n")
    diagnostics = run(text).diagnostics
    assert [(d.code, d.line) for d in diagnostics] == [("NPU311", 2), ("NPU311", 4), ("NPU311", 5)]
    assert "names CUDA sources (`a.cu`, `b.cu`)" in diagnostics[2].message


def test_only_requirements_and_conda_environments_among_text_and_yaml_files(tmp_path, monkeypatch) -> None:
    """NPU315: discovery hands `*requirements*.txt`, `environment*.y(a)ml` and `conda*.y(a)ml` to the
    manifest rule; other `.txt` and YAML files (configs, notes) are not read."""
    from click.testing import CliRunner

    from npu_migrate.commands.apply import command

    (tmp_path / "environment.yaml").write_text("dependencies:\n  - cudatoolkit=11.3\n")
    (tmp_path / "requirements-train.txt").write_text("xformers==0.0.18\n")
    (tmp_path / "notes.txt").write_text("xformers==0.0.18\n")
    (tmp_path / "config.yaml").write_text("deps:\n  - cudatoolkit=11.3\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "--check", "."], catch_exceptions=False)
    reported = sorted(line.split(":")[0] for line in result.stdout.splitlines() if " NPU315 " in line)
    assert reported == ["environment.yaml", "requirements-train.txt"]
    assert (tmp_path / "environment.yaml").read_text() == "dependencies:\n  - cudatoolkit=11.3\n"  # unchanged


REQUIREMENT_LINES = [
    # (line, reported): read as PEP 508 by `packaging`, as pip reads them (issue 29)
    ("torch @ https://download.pytorch.org/whl/cu118/torch-2.0.0%2Bcu118-cp311-cp311-linux_x86_64.whl", True),
    ("torch===2.0.0+cu118", True),
    ("torch==2.1.0+cu121 \\", True),  # a continued line (the hashes follow)
    ("Flash_Attn[all]>=2.3 ; platform_machine == 'x86_64'", True),  # names are normalised
    ("nvidia-cublas-cu12 @ file:///wheels/nvidia_cublas_cu12-12.1-py3-none-any.whl", True),
    ("torch==2.1.0+cpu", False),
    ("numpy>=1.24 --hash=sha256:0123", False),
    ("torch>=2.1; python_version >= '3.8' and extra == 'cu118'", False),  # a marker is not a build
    ("-r other-requirements.txt", False),
    ("-e .", False),
]


@pytest.mark.parametrize("line, reported", REQUIREMENT_LINES)
def test_requirement_lines_are_read_as_pip_reads_them(line, reported):
    outcome = rule_cases.migrate(line + "\n", ["NPU315"], "requirements.txt")
    assert [d.code for d in outcome.diagnostics] == (["NPU315"] if reported else []), outcome.diagnostics
