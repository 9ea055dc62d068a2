"""Properties of the issue-2 rule family (NPU101-NPU143) as a whole: idempotence over
combinations of the patterns, no crash on arbitrary valid Python, untouched files without CUDA."""

import ast
import subprocess
import sys

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from codemods.api.registry import all_rules, select_rules
from codemods.api.rule import RuleContext
from codemods.api.runner import RuleRunner
from codemods.model.filemodel import FileModel
from npu_migrate.apply.engine import RuleSet, migrate_text

FAMILY = ["NPU100", "NPU101", "NPU102", "NPU103", "NPU104", "NPU105", "NPU120", "NPU121",
          "NPU130", "NPU140", "NPU141", "NPU142", "NPU143"]
RULES = select_rules(all_rules(), select=FAMILY)
RULESET = RuleSet(RULES)

HEADER = [
    "import torch",
    "import torch as th",
    "import torch.distributed as dist",
    "import argparse",
    "from torch.cuda import synchronize, get_arch_list",
    "from torch.cuda.amp import autocast, GradScaler",
    "from torch import cuda",
    "import torch.cuda as tc",
    "from torch.distributed import Backend, is_nccl_available",
]
STATEMENTS = [
    "x = t.cuda(non_blocking=True)",
    "ok = x.is_cuda",
    'd = torch.device("cuda", 0)',
    "d = th.device(f'cuda:{rank}')",
    'y = x.to("cuda:%d" % i)',
    'y = x.to("cuda:{}".format(i), non_blocking=True)',
    'z = torch.zeros(2, device="cuda" if torch.cuda.is_available() else "cpu")',
    'm = torch.load("cuda_model.pt", map_location="cuda")',
    'same = x.device.type == "cuda"',
    'p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda")',
    'p.add_argument("--no-cuda", action="store_true")',
    "torch.cuda.synchronize()",
    "n = th.cuda.device_count()",
    "synchronize()",
    "archs = get_arch_list()",
    "cuda.empty_cache()",
    "tc.manual_seed_all(1)",
    "s = GradScaler()",
    "s2 = torch.cuda.amp.GradScaler(1024.0)",
    "c = torch.cuda.amp.autocast(True, torch.bfloat16)",
    "a = autocast(enabled=False)",
    "b = torch.autocast(device_type='cuda')",
    "g = torch.amp.GradScaler()",
    'dist.init_process_group("nccl")',
    'dist.init_process_group(backend="cuda:nccl,cpu:gloo")',
    "k = Backend.NCCL",
    "ok = is_nccl_available() and dist.is_nccl_available()",
    'ok = dist.get_backend() == "nccl"',
    'print("cuda is ready, nccl too")',
    "# a comment about torch.cuda.synchronize()",
]


def run(text: str):
    outcome = migrate_text(text, "gen.py", RULESET)
    assert outcome.error is None, outcome.error
    return outcome.new_text if outcome.new_text is not None else text


def indent(lines):
    return ["    " + line for line in lines]


@st.composite
def programs(draw):
    header = draw(st.lists(st.sampled_from(HEADER), unique=True, max_size=5))
    body = draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=8)) + ["pass"]
    wrap = draw(st.sampled_from(["module", "function", "class"]))
    if wrap == "function":
        body = ["def main(t, x, i, rank, p):"] + indent(body)
    elif wrap == "class":
        body = ["class Runner:", "    def go(self, t, x, i, rank, p):"] + indent(indent(body))
    return "\n".join(header + body) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_idempotent_and_non_devices_survive(text):
    once = run(text)
    ast.parse(once)
    assert run(once) == once
    assert once.count("# a comment about torch.cuda.synchronize()") == text.count(
        "# a comment about torch.cuda.synchronize()")
    assert once.count('"cuda is ready, nccl too"') == text.count('"cuda is ready, nccl too"')
    assert once.count('"cuda_model.pt"') == text.count('"cuda_model.pt"')
    assert once.count('"--no-cuda"') == text.count('"--no-cuda"')


def test_all_patterns_together():
    """Every pattern of the pools at once (one module): each is rewritten as it is alone."""
    once = run("\n".join(HEADER + STATEMENTS) + "\n")
    for fragment in [
        "import torch_npu  # noqa: F401", "from torch.cuda import get_arch_list; from torch.npu import synchronize",
        "from torch.amp import autocast, GradScaler", "from torch import npu as cuda", "import torch.npu as tc",
        "from torch.distributed import Backend, is_hccl_available", "x = t.npu(non_blocking=True)",
        "ok = x.is_npu", 'torch.device("npu", 0)', "th.device(f'npu:{rank}')", 'x.to("npu:%d" % i)',
        'x.to("npu:{}".format(i), non_blocking=True)', 'device="npu" if torch.npu.is_available() else "cpu"',
        'torch.load("cuda_model.pt", map_location="npu")', 'x.device.type == "npu"',
        'default="npu", choices=["npu", "cpu"], help="cuda"', 'p.add_argument("--no-cuda", action="store_true")',
        "torch.npu.synchronize()", "th.npu.device_count()", 'GradScaler("npu")',
        'torch.amp.GradScaler("npu", 1024.0)', 'torch.amp.autocast("npu", enabled=True, dtype=torch.bfloat16)',
        'autocast("npu", enabled=False)', "torch.autocast(device_type='npu')", 'torch.amp.GradScaler("npu")',
        'dist.init_process_group("hccl")', 'backend="npu:hccl,cpu:gloo"', "k = Backend.HCCL",
        "is_hccl_available() and dist.is_hccl_available()", 'dist.get_backend() == "hccl"',
        'print("cuda is ready, nccl too")', "# a comment about torch.cuda.synchronize()",
    ]:
        assert fragment in once, fragment


# -- the migrated code runs ----------------------------------------------------------------------

RUNTIME_SOURCE = """\
import torch
import torch.distributed as dist
from torch.cuda.amp import GradScaler
from torch.distributed import Backend

@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
def fwd(ctx, x):
    return x

def run(rank):
    model = torch.nn.Sequential().cuda()  # no parameters: nothing moves, the method must exist
    t = torch.ones(2)
    device = 'cuda:0'
    dev = torch.device(f'cuda:{rank}')
    other = torch.device('cuda', rank)
    devices = (torch.device(device), dev, other, dev.type == 'cuda', str(device).startswith('cuda'))
    with torch.cuda.amp.autocast(True, torch.bfloat16):
        amp_state = (torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype())
    scaler = GradScaler(2.0 ** 10, 3.0)
    scaler2 = torch.cuda.amp.GradScaler()
    scalers = (scaler._init_scale, scaler._growth_factor, scaler._device, scaler2._device)
    backend = (Backend('hccl') == Backend.NCCL, Backend('gloo') == Backend.NCCL)
    return t.is_cuda, model is not None, devices, amp_state, scalers, backend
"""

# what `import torch_npu` does that the migrated code relies on, on CPU torch: PrivateUse1
# renamed to "npu" with generated `.npu()`/`.is_npu`, a device module, hccl registered
HARNESS = """\
import types
import torch
import torch.distributed as dist
torch.utils.rename_privateuse1_backend("npu")
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True)
stub = types.ModuleType("npu_stub")
stub.is_available = lambda: True
stub.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16, torch.float32]
torch._register_device_module("npu", stub)
dist.Backend.register_backend("hccl", lambda *a, **k: None, devices=["cpu"])
"""


def test_migrated_code_runs_against_torch_with_an_npu_backend(tmp_path):
    """In a subprocess (the registrations are process-wide): every rewritten name and call
    binds to a real torch API and acts on the "npu" device."""
    pytest.importorskip("torch")
    migrated = run(RUNTIME_SOURCE)
    assert "cuda" not in migrated.replace("import torch_npu", "")
    script = tmp_path / "run.py"
    script.write_text(HARNESS + migrated.replace("import torch_npu  # noqa: F401\n", "")
                      + "print(run(1))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "(False, True, (device(type='npu', index=0), device(type='npu', index=1), "
        "device(type='npu', index=1), True, True), (True, torch.bfloat16), "
        "(1024.0, 3.0, 'npu', 'npu'), (True, False))")


# -- arbitrary valid Python ------------------------------------------------------------------------

def _run_rules_directly(module: cst.Module, source: str):
    """Bypass the prefilters: every rule of the family visits every node of the module."""
    context = RuleContext(FileModel("gen.py", source, ast.parse(source)))
    runner = RuleRunner([cls(context) for cls in RULES])
    new_module, _ = runner.run(module, 0)
    return new_module.code


# compile() accepts a backslash-continued blank line at the end of a file; LibCST's tokenizer
# does not ("unexpected end of file after a line continuation"). Found by hypothesis once.
BACKSLASH_AT_EOF = "\n\\\r\n"


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_grammar())
@example(BACKSLASH_AT_EOF)
@example("import torch\nx = t.cuda()\n" + BACKSLASH_AT_EOF)
def test_no_crash_on_arbitrary_python(source):
    """What the engine does with any program CPython compiles: a rewrite that parses, or the
    file left untouched with a clear error when LibCST cannot parse it; never a crash."""
    try:
        compile(source, "gen.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return  # hypothesmith occasionally yields code CPython rejects
    outcome = migrate_text(source, "gen.py", RULESET)
    assert outcome.error is None or "LibCST cannot parse" in outcome.error, outcome.error
    if outcome.error:
        assert outcome.new_text is None  # left untouched
    if outcome.new_text is not None:
        ast.parse(outcome.new_text)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return  # the engine's answer to such a file was checked above
    ast.parse(_run_rules_directly(module, source))


def test_a_file_libcst_cannot_tokenize_is_left_untouched_with_one_clear_error():
    outcome = migrate_text("import torch\nx = t.cuda()\n" + BACKSLASH_AT_EOF, "gen.py", RULESET)
    assert outcome.new_text is None
    assert outcome.error is not None and outcome.error.startswith("gen.py:")
    assert "LibCST cannot parse" in outcome.error


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_grammar())
def test_files_without_cuda_come_back_byte_identical(source):
    if any(word in source for word in ("cuda", "nccl", "NCCL", "amp", "autocast", "GradScaler",
                                       "custom_fwd", "custom_bwd")):
        return
    outcome = migrate_text(source, "gen.py", RULESET)
    assert outcome.new_text is None
    assert outcome.edits == [] and outcome.diagnostics == []


@pytest.mark.parametrize("text", [
    "import torch\r\nx = torch.ones(2)\r\nprint('gpu')\r\n",
    "\ufeffimport torch\nmodel = Net()\nmodel.train()\n",
    "if True:\n\tx = torch.zeros(1)  # tab\n",
    "",
])
def test_plain_torch_files_are_untouched(text):
    outcome = migrate_text(text, "plain.py", RULESET)
    assert outcome.error is None and outcome.new_text is None


TRAINING_SCRIPT = '''\
import argparse
import os

import torch
import torch.distributed as dist
from torch.cuda.amp import GradScaler, autocast


def setup(rank, world_size, backend="nccl"):
    os.environ["MASTER_ADDR"] = "localhost"
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)


def train(args, model, loader, rank):
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device(f"cuda:{rank}" if use_cuda else "cpu")
    scaler = GradScaler(enabled=args.amp)
    for x, y in loader:
        x = x.cuda(non_blocking=True)
        with autocast(enabled=args.amp):
            loss = model(x)
        if x.is_cuda:
            torch.cuda.synchronize()
    torch.save(model.state_dict(), "cuda_model.pt")


if __name__ == "__main__":
    torch.backends.cudnn.benchmark = True
'''


def test_a_training_script_that_also_sets_torch_attributes():
    """`torch.backends.cudnn.benchmark = True` assigns an attribute of `torch`; it must not
    make `torch` look rebound (which would stop every `torch.cuda.X` rewrite in the file)."""
    once = run(TRAINING_SCRIPT)
    for fragment in ['backend="hccl"', "torch.npu.set_device(rank)", "torch.npu.is_available()",
                     'torch.device(f"npu:{rank}" if use_cuda else "cpu")', 'GradScaler("npu", enabled=args.amp)',
                     "x.npu(non_blocking=True)", 'autocast("npu", enabled=args.amp)', "x.is_npu",
                     "torch.npu.synchronize()", '"cuda_model.pt"', "from torch.amp import GradScaler, autocast"]:
        assert fragment in once, fragment
    assert run(once) == once
