"""NPU103 device strings in device positions, NPU104 device comparisons, NPU105 argparse."""

import json

import pytest
import rule_cases

from codemods.analyses.devices import device_positions, load_positions

CODES = ["NPU103", "NPU104", "NPU105"]
T = "import torch\n"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


REWRITES = [
    # torch.device and aliases
    (T + 'd = torch.device("cuda")\n', T + 'd = torch.device("npu")\n'),
    (T + "d = torch.device('cuda', 1)\n", T + "d = torch.device('npu', 1)\n"),
    (T + 'd = torch.device(type="cuda", index=0)\n', T + 'd = torch.device(type="npu", index=0)\n'),
    ("import torch as th\nd = th.device('cuda:0')\n", "import torch as th\nd = th.device('npu:0')\n"),
    ("from torch import device\nd = device('cuda:3')\n", "from torch import device\nd = device('npu:3')\n"),
    (T + "with torch.device('cuda'):\n    pass\n", T + "with torch.device('npu'):\n    pass\n"),
    # string forms
    (T + 'd = torch.device(f"cuda:{rank}")\n', T + 'd = torch.device(f"npu:{rank}")\n'),
    (T + 'd = torch.device(f"cuda:{rank % 8:d}")\n', T + 'd = torch.device(f"npu:{rank % 8:d}")\n'),
    (T + 'd = torch.device("cuda:%d" % i)\n', T + 'd = torch.device("npu:%d" % i)\n'),
    (T + 'd = torch.device("cuda:{}".format(i))\n', T + 'd = torch.device("npu:{}".format(i))\n'),
    (T + 'd = torch.device("cuda:" + str(i))\n', T + 'd = torch.device("npu:" + str(i))\n'),
    (T + "d = torch.device(r'cuda')\n", T + "d = torch.device(r'npu')\n"),
    # keywords of any call
    (T + 'x = torch.zeros(3, device="cuda:0")\n', T + 'x = torch.zeros(3, device="npu:0")\n'),
    ('cfg = make(device="cuda", name="cuda")\n', 'cfg = make(device="npu", name="cuda")\n'),
    (T + 'm = torch.load("cuda_model.pt", map_location="cuda")\n',
     T + 'm = torch.load("cuda_model.pt", map_location="npu")\n'),
    (T + "m = torch.load(f, 'cuda:0')\n", T + "m = torch.load(f, 'npu:0')\n"),
    (T + 'g = torch.Generator(device="cuda")\n', T + 'g = torch.Generator(device="npu")\n'),
    ('r = fork_rng(device_type="cuda")\n', 'r = fork_rng(device_type="npu")\n'),
    # methods
    ('y = x.to("cuda")\n', 'y = x.to("npu")\n'),
    ("y = x.to('cuda:1', non_blocking=True)\n", "y = x.to('npu:1', non_blocking=True)\n"),
    ('y = x.to(device="cuda", dtype=d)\n', 'y = x.to(device="npu", dtype=d)\n'),
    ('y = x.cuda("cuda:1")\n', 'y = x.cuda("npu:1")\n'),
    ('y = model.to(\n    "cuda"  # keep\n)\n', 'y = model.to(\n    "npu"  # keep\n)\n'),
    # availability conditional, anywhere
    (T + 'dev = "cuda" if torch.cuda.is_available() else "cpu"\n',
     T + 'dev = "npu" if torch.cuda.is_available() else "cpu"\n'),
    (T + 'dev = "cpu" if not torch.cuda.is_available() else "cuda:0"\n',
     T + 'dev = "cpu" if not torch.cuda.is_available() else "npu:0"\n'),
    (T + 'dev = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")\n',
     T + 'dev = torch.device("npu" if args.cuda and torch.cuda.is_available() else "cpu")\n'),
    ('x = t.to(device="cuda" if use_gpu else "cpu")\n', 'x = t.to(device="npu" if use_gpu else "cpu")\n'),
    # names that hold devices (inside functions and classes)
    ('def f(model, device="cuda"):\n    pass\n', 'def f(model, device="npu"):\n    pass\n'),
    ('def f():\n    device = "cuda:1"\n', 'def f():\n    device = "npu:1"\n'),
    ('class C:\n    def __init__(self):\n        self.device: str = "cuda"\n',
     'class C:\n    def __init__(self):\n        self.device: str = "npu"\n'),
    ('cfg = {"device": "cuda", "name": "cuda"}\n', 'cfg = {"device": "npu", "name": "cuda"}\n'),
    # comparisons (NPU104)
    ('if x.device.type == "cuda":\n    pass\n', 'if x.device.type == "npu":\n    pass\n'),
    ('ok = "cuda" != t.device.type\n', 'ok = "npu" != t.device.type\n'),
    ("ok = device in ('cuda', 'cpu')\n", "ok = device in ('npu', 'cpu')\n"),
    ('ok = args.device == "cuda:0"\n', 'ok = args.device == "npu:0"\n'),
    ('ok = str(device).startswith("cuda")\n', 'ok = str(device).startswith("npu")\n'),
    ('ok = torch.device(d).type == "cuda"\n', 'ok = torch.device(d).type == "npu"\n'),
    ('ok = self.dev.type == "cuda"\n', 'ok = self.dev.type == "npu"\n'),
    # argparse (NPU105)
    ('p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda or cpu")\n',
     'p.add_argument("--device", default="npu", choices=["npu", "cpu"], help="cuda or cpu")\n'),
    ("p.add_argument('-d', '--device_type', type=str, default='cuda')\n",
     "p.add_argument('-d', '--device_type', type=str, default='npu')\n"),
    (T + "p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n",
     T + "p.add_argument('--device', default='npu' if torch.cuda.is_available() else 'cpu')\n"),
]

UNCHANGED = [
    'print("running on cuda")\n',
    'logger.info("cuda:0 is busy")\n',
    'path = "cuda_model.pt"\nm = torch.load("cuda_model.pt")\n',
    '"""Moves the model to cuda."""\n',
    'def f():\n    """Use "cuda" here."""\n',
    '# device="cuda"\nx = 1\n',
    'p.add_argument("--no-cuda", action="store_true", help="disable cuda")\n',
    'p.add_argument("--backend", default="cuda")\n',  # not a device option by name
    'DEVICE = "cuda"\n',  # module-level constants: followed through their uses by issue-3 rules
    'name = "cuda"\n',
    'x = t.to(b"cuda")\n',  # bytes are no device
    'y = x.to(0)\n',  # an accelerator index works unchanged
    'y = x.to(device)\n',
    'ok = kind == "cuda"\n',  # not a device by name
    'if backend.type == "cuda":\n    pass\n',
    'x = {"cuda": 1}\n',
    'y = x.to("npu:0")\n',
    'with torch.autocast("cuda"):\n    pass\n',  # NPU130 owns AMP calls
    'dev = "cuda" if use_gpu else "cpu"\n',  # not an availability test, not a device position
    'assert x.device.type == "cuda:x"\n',
]


test_rewrites, test_idempotent, test_unchanged = rule_cases.table_tests(_RULES, REWRITES, UNCHANGED)


@pytest.mark.parametrize("src", [
    'x = t.to(device="cuda,cpu")\n',
    'x = torch.zeros(1, device="cuda:0,1")\n',
    'x = torch.zeros(1, device=f"cuda:{a}:{b}")\n',
])
def test_doubtful_device_strings_are_reported_not_rewritten(src):
    outcome = migrate("import torch\n" + src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU103", 2)]
    assert "port it by hand" in outcome.diagnostics[0].message


def test_edit_codes_lines_and_messages():
    src = ('import torch\n'
           'x = torch.ones(2, device="cuda")\n'
           'if x.device.type == "cuda":\n'
           '    parser.add_argument("--device", default="cuda")\n')
    outcome = migrate(src)
    assert [(e.code, e.line) for e in outcome.edits] == [("NPU103", 2), ("NPU104", 3), ("NPU105", 4)]
    assert outcome.edits[0].message == '`"cuda"` → `"npu"` (`device=` of `torch.ones()`)'


def test_f_string_and_conditional_in_one_call_get_one_edit_each():
    src = T + 'd = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    outcome = migrate(src)
    assert len(outcome.edits) == 1


def test_positions_files_are_merged(tmp_path):
    (tmp_path / "device_positions.json").write_text(json.dumps(
        {"keywords": ["device"], "functions": {"torch.device": {"positions": [0]}},
         "methods": {"to": [0]}, "names": ["device"]}))
    (tmp_path / "device_positions_extra.json").write_text(json.dumps(
        {"keywords": ["output_device"], "functions": {"torch.device": {"keywords": ["type"]},
                                                      "a.b": {"positions": [2]}},
         "methods": {"to": [1]}, "skip_functions": ["x.y"]}))
    table = load_positions(sorted(tmp_path.glob("device_positions*.json")))
    assert table.keywords == {"device", "output_device"}
    assert table.functions["torch.device"] == ({0}, {"type"})
    assert table.functions["a.b"] == ({2}, frozenset())
    assert table.methods["to"] == {0, 1}
    assert table.skip_functions == {"x.y"}


def test_shipped_positions_cover_the_amp_calls_the_amp_rule_owns():
    from codemods.rules.npu130_amp_device import amp_table

    assert set(amp_table().generic) <= device_positions().skip_functions


def test_prefilter_skips_files_without_device_strings():
    outcome = migrate("x = t.cuda()\nprint('cuda_model')\n")
    assert outcome.parsed is False


def test_statements_of_a_function_keep_their_indentation():
    """Untouched statements next to rewritten ones in a function body come back verbatim."""
    src = ("import torch\n"
           "def pick(rank):\n"
           "    device = 'cuda:0'\n"
           "    other = 'cuda'\n"
           "    return torch.device(device), other\n")
    assert after(src) == src.replace("'cuda:0'", "'npu:0'")


def test_a_choice_between_cuda_and_cpu_is_a_device():
    """nanoGPT's `device_type = 'cuda' if 'cuda' in device else 'cpu'`, later given to autocast."""
    src = ("import torch\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'\n"
           "x = 'cpu' if device != 'cuda:1' else 'cuda:1'\nlabel = 'cuda' if 'cuda' in d else 'slow'\n")
    out = after(src, codes=["NPU103", "NPU104"])
    assert out.splitlines()[1:] == ["device_type = 'npu' if 'npu' in device else 'cpu'",
                                    "x = 'cpu' if device != 'npu:1' else 'npu:1'",
                                    "label = 'cuda' if 'cuda' in d else 'slow'"]
    assert after(out, codes=["NPU103", "NPU104"]) == out
