"""NPU599, the final sweep: CUDA-specific code left in the migrated text and covered by no
other diagnostic is reported; text, comments, docstrings and what rules handled are not."""

import pytest
import rule_cases

from codemods.analyses.cudasites import cuda_sites
from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

T = "import torch\n"


def sweep_only(src: str) -> list:
    return [d for d in rule_cases.migrate(src, ["NPU599"]).diagnostics if d.code == "NPU599"]


def with_defaults(src: str):
    outcome = migrate_text(src, "t.py", RuleSet(select_rules(all_rules())))
    assert outcome.error is None, outcome.error
    return outcome


# the NPU599 examples that stay silent are its CASES (codemods/rules/npu599_cuda_left_behind.py); the
# reports stay here: each names the construct it found, which a case cannot check
LEFT = [
    (T + "torch.cuda.foo_bar()\n", 2, "torch.cuda.foo_bar"),
    (T + "f = getattr(torch.cuda, name)\n", 2, "torch.cuda"),
    (T + "try:\n    pass\nexcept torch.cuda.OutOfMemoryError:\n    pass\n", 4, "torch.cuda.OutOfMemoryError"),
    ("def f(x):\n    return x.cuda()\n", 2, ".cuda()"),
    ("def f(x):\n    return x.is_cuda\n", 2, ".is_cuda"),
    ("d = 'cuda:%d' % 3\n", 1, "'cuda:%d'"),
    ("d = 'cuda:{}'.format(3)\n", 1, "'cuda:{}'"),
    ("d = f'cuda:{rank}'\n", 1, 'f"cuda:..."'),
    ("backend = 'nccl'\n", 1, "'nccl'"),
    ("import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n", 2, "CUDA_LAUNCH_BLOCKING"),
    ("providers = ['CUDAExecutionProvider']\n", 1, "CUDAExecutionProvider"),
    ("x = y.cuda()\nimport tensorrt as trt\n", 2, "import tensorrt"),
    ("x = y.cuda()\nfrom flash_attn import flash_attn_func\n", 2, "import flash_attn"),
    ("x = y.cuda()\nimport cupy\n", 2, "import cupy"),
    ("x = y.cuda()\nimport pynvml\n", 2, "import pynvml"),
    ("from unittest import mock\nmock.patch('torch.cuda.is_available', return_value=True)\n", 2,
     "torch.cuda target"),
    ("import lightning as L\nt = L.Trainer(accelerator='gpu')\n", 2, 'accelerator="gpu"'),
    ("from lightning.pytorch.accelerators import CUDAAccelerator\n", 1, "CUDAAccelerator"),
    ("import torch.distributed as dist\nb = dist.Backend.NCCL\n", 2, "torch.distributed.Backend.NCCL"),
    ("import torch.backends.cudnn as cudnn\nv = cudnn.some_future_knob\n", 2, "torch.backends.cudnn.some_future_knob"),
    ("cfg.trainer.accelerator = 'gpu'\n", 1, 'accelerator = "gpu"'),
    ("from torch.nn.attention import SDPBackend\nb = SDPBackend.CUDNN_ATTENTION\n", 2, "CUDNN_ATTENTION"),
]


@pytest.mark.parametrize("src,line,construct", LEFT)
def test_reports_what_is_left(src, line, construct):
    found = [d for d in sweep_only(src) if d.line == line]
    assert len(found) == 1, sweep_only(src)
    assert construct in found[0].message


def test_nothing_left_after_rules_that_handle_everything():
    src = T + "def f(x):\n    torch.cuda.synchronize()\n    return x.cuda().to('cuda:0')\n"
    outcome = with_defaults(src)
    assert [d for d in outcome.diagnostics if d.code == "NPU599"] == []
    assert "torch.npu.synchronize()" in outcome.new_text


@pytest.mark.parametrize("imports", ["import torch.backends.cudnn as cudnn\n", "from torch.backends import cudnn\n"])
def test_cudnn_import_is_quiet_and_its_flags_are_npu161_info(imports):
    outcome = with_defaults(imports + "cudnn.enabled = True\n")
    assert [(d.code, d.line, d.severity.value) for d in outcome.diagnostics] == [("NPU161", 2, "info")]
    removed = with_defaults(imports + "cudnn.benchmark = True\n")  # NPU161 removes it: nothing is left to say
    assert removed.diagnostics == [] and [e.code for e in removed.edits] == ["NPU161"]
    assert removed.new_text == imports


def test_a_diagnostic_of_another_rule_covers_its_statement():
    # NPU314 reports the PyCUDA import: the sweep says nothing more about that line
    outcome = with_defaults("import pycuda.driver as drv\n")
    assert [d.code for d in outcome.diagnostics] == ["NPU314"]


def test_report_points_at_the_original_line_after_an_import_was_added():
    src = T + "def f(x):\n    x = x.cuda()\n    d = 'cuda:%d' % 3\n    return torch.device(d)\n"
    outcome = with_defaults(src)
    assert outcome.new_text.count("\n") > src.count("\n")  # `import torch_npu` was added
    left = [d for d in outcome.diagnostics if d.code == "NPU599"]
    lines = src.splitlines()
    for diagnostic in left:
        assert "cuda" in lines[diagnostic.line - 1]


def test_suppression_comment_silences_the_sweep():
    assert sweep_only("backend = 'nccl'  # npu-migrate: ignore[NPU599]\n") == []


def test_scanner_keeps_source_order_and_each_site_once():
    import ast

    tree = ast.parse("import torch\nx = torch.cuda.amp.autocast\ny.cuda()\n")
    sites = cuda_sites(tree)
    assert [(s.line, s.construct) for s in sites] == [(2, "torch.cuda.amp.autocast"), (3, ".cuda()")]


@pytest.mark.parametrize("src", ["import tensorrt as trt\n", "import cupy\n", "import pynvml\n",
                                 "from flash_attn import flash_attn_func\n", "import xformers.ops as xops\n"])
def test_cuda_only_library_alone_is_reported_by_the_default_rules(src):
    assert [d.line for d in with_defaults(src).diagnostics] == [1]


def test_a_noqa_comment_does_not_hide_a_site_but_an_ignore_for_another_rule_does():
    assert len(sweep_only("backend = 'nccl'  # noqa: E501\n")) == 1
    assert sweep_only("backend = 'nccl'  # npu-migrate: ignore[NPU140]\n") == []


def test_match_statements_are_swept_like_any_other_block():
    # a `case` clause has no line of its own in `ast` (torch/_dynamo/variables/builder.py used to
    # end in an internal error here)
    # (statements are mapped when another rule reported something too: NPU314 on line 1)
    src = ("import pycuda.driver as drv\n" + T
           + "def f(kind):\n    match kind:\n        case 'gpu':\n            return torch.version.cuda\n")
    outcome = with_defaults(src)
    assert [(d.code, d.line) for d in outcome.diagnostics if d.code == "NPU599"] == [("NPU599", 6)]
