"""Issue-3 device arguments: the positions of device_positions_extra.json (rewritten by NPU103),
NPU152 torch.load map_location dicts and callables, NPU180 get_device_capability, and the issue
items other rules own (checked here to be covered, not re-implemented)."""

from __future__ import annotations

import io

import pytest
import torch
from rule_cases import codes_at, data, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

N = "import torch_npu  # noqa: F401\n"


def _call_with_cuda(function: str, position: int) -> str:
    args = ["a"] * position + ['"cuda:1"']
    return f"{function}({', '.join(args)})"


EXTRA = data("device_positions_extra.json")


@pytest.mark.parametrize("function,spec", sorted(EXTRA["functions"].items()))
def test_every_extra_position_is_rewritten(function: str, spec: dict) -> None:
    module, _, name = function.rpartition(".")
    lines = [f"from {module} import {name}"]
    lines += [f"x{i} = {_call_with_cuda(name, p)}" for i, p in enumerate(spec.get("positions", ()))]
    lines += [f'k{i} = {name}({kw}="cuda:1")' for i, kw in enumerate(spec.get("keywords", ()))]
    src = "\n".join(lines) + "\n"
    text = after(src, ["NPU103"])
    assert '"cuda:1"' not in text and text.count('"npu:1"') == len(lines) - 1
    assert_idempotent(src, ["NPU103"])


@pytest.mark.parametrize("keyword", EXTRA["keywords"])
def test_every_extra_keyword_is_rewritten(keyword: str) -> None:
    src = f'import torch\nm = wrap(model, {keyword}="cuda")\n'
    assert f'{keyword}="npu"' in after(src, ["NPU103"])


ISSUE_ITEMS = [
    # (what the issue lists, CUDA source, expected NPU text, code of the rule that does it)
    ("torch.Generator('cuda')", 'g = torch.Generator("cuda")\n', 'g = torch.Generator("npu")\n', "NPU103"),
    ("torch.Generator(device=)", 'g = torch.Generator(device="cuda:0")\n', 'g = torch.Generator(device="npu:0")\n',
     "NPU103"),
    ("torch.Event", 'e = torch.Event("cuda", enable_timing=True)\n', 'e = torch.Event("npu", enable_timing=True)\n',
     "NPU103"),
    ("torch.cuda.Stream/Event", "s = torch.cuda.Stream()\ne = torch.cuda.Event(enable_timing=True)\n",
     "s = torch.npu.Stream()\ne = torch.npu.Event(enable_timing=True)\n", "NPU120"),
    ("torch.cuda.stream/current_stream", "with torch.cuda.stream(s):\n    c = torch.cuda.current_stream()\n",
     "with torch.npu.stream(s):\n    c = torch.npu.current_stream()\n", "NPU120"),
    ("DDP output_device", "m = torch.nn.parallel.DistributedDataParallel(m, device_ids=[r], output_device='cuda:0')\n",
     "m = torch.nn.parallel.DistributedDataParallel(m, device_ids=[r], output_device='npu:0')\n", "NPU103"),
    ("DDP device_ids of torch.device",
     "m = torch.nn.parallel.DistributedDataParallel(m, device_ids=[torch.device('cuda', r)])\n",
     "m = torch.nn.parallel.DistributedDataParallel(m, device_ids=[torch.device('npu', r)])\n", "NPU103"),
    ("FSDP device_id", "m = FSDP(m, device_id=torch.device('cuda:0'))\n", "m = FSDP(m, device_id=torch.device('npu:0'))\n",
     "NPU103"),
    ("init_device_mesh", 'mesh = torch.distributed.device_mesh.init_device_mesh("cuda", (2, 4))\n',
     'mesh = torch.distributed.device_mesh.init_device_mesh("npu", (2, 4))\n', "NPU103"),
    ("init_device_mesh(device_type=)", 'mesh = init_device_mesh(device_type="cuda", mesh_shape=(8,))\n',
     'mesh = init_device_mesh(device_type="npu", mesh_shape=(8,))\n', "NPU103"),
    ("pipelining stage", "st = torch.distributed.pipelining.PipelineStage(mod, i, n, f'cuda:{rank}')\n",
     "st = torch.distributed.pipelining.PipelineStage(mod, i, n, f'npu:{rank}')\n", "NPU103"),
    ("set_default_device", 'torch.set_default_device("cuda")\n', 'torch.set_default_device("npu")\n', "NPU103"),
    ("with torch.device", 'with torch.device("cuda"):\n    m = Net()\n', 'with torch.device("npu"):\n    m = Net()\n',
     "NPU103"),
    ("pin_memory_device", 'dl = torch.utils.data.DataLoader(ds, pin_memory=True, pin_memory_device="cuda")\n',
     'dl = torch.utils.data.DataLoader(ds, pin_memory=True, pin_memory_device="npu")\n', "NPU103"),
    ("torch.load map_location string", 'sd = torch.load(p, map_location="cuda:0")\n',
     'sd = torch.load(p, map_location="npu:0")\n', "NPU103"),
    ("torch.load map_location device", "sd = torch.load(p, map_location=torch.device('cuda'))\n",
     "sd = torch.load(p, map_location=torch.device('npu'))\n", "NPU103"),
    ("torch.load map_location dict", "sd = torch.load(p, map_location={'cuda:1': 'cuda:0'})\n",
     "sd = torch.load(p, map_location={'cuda:1': 'npu:0', 'npu:1': 'npu:0'})\n", "NPU152"),
    ("fork_rng", 'with torch.random.fork_rng(devices=[0], device_type="cuda"):\n    pass\n',
     'with torch.random.fork_rng(devices=[0], device_type="npu"):\n    pass\n', "NPU103"),
    ("autograd profiler use_device", "with torch.autograd.profiler.profile(use_device='cuda'):\n    pass\n",
     "with torch.autograd.profiler.profile(use_device='npu'):\n    pass\n", "NPU103"),
    ("GradScaler('cuda') (AMP rule)", 'scaler = torch.amp.GradScaler("cuda")\n', 'scaler = torch.amp.GradScaler("npu")\n',
     "NPU130"),
    ("custom_fwd(device_type=) (AMP rule)",
     '@torch.amp.custom_fwd(device_type="cuda")\ndef f(ctx, x):\n    return x\n',
     '@torch.amp.custom_fwd(device_type="npu")\ndef f(ctx, x):\n    return x\n', "NPU130"),
]


@pytest.mark.parametrize("item", ISSUE_ITEMS, ids=lambda i: i[0])
def test_issue_items_are_covered_by_the_default_rules(item: tuple[str, str, str, str]) -> None:
    _, before, expected, code = item
    outcome = migrate("import torch\n" + before)
    assert outcome.new_text is not None and outcome.new_text.endswith(expected)
    assert code in {e.code for e in outcome.edits}
    assert_idempotent("import torch\n" + before)


def test_backend_comparison_is_covered_by_the_distributed_rule() -> None:
    outcome = migrate('import torch.distributed as dist\nif args.backend == "nccl":\n    pass\n')
    assert outcome.new_text.endswith('if args.backend == "hccl":\n    pass\n')
    assert any(e.code.startswith("NPU14") for e in outcome.edits)


# the map_location dict rewrites are NPU152's CASES (codemods/rules/npu152_map_location_dict.py)
def test_map_location_dict_loads_a_gpu_and_an_npu_checkpoint_alike() -> None:
    """The rewritten dict, used by the real torch.load on CPU: a checkpoint whose storages were
    tagged 'cuda:0' and one tagged 'npu:0' both land where the dict says (here: cpu)."""
    text = after("import torch\nsd = torch.load(f, map_location={'cuda:0': 'cpu'})\n", ["NPU152"])
    mapping = eval(text[text.index("map_location=") + len("map_location="):text.rindex(")")])
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    for saved_on in ("cuda:0", "npu:0"):
        assert mapping.get(saved_on, saved_on) == "cpu"
    buffer.seek(0)
    loaded = torch.load(buffer, map_location=mapping)
    assert torch.equal(loaded["w"], torch.ones(2))


def test_map_location_callable_is_reported() -> None:
    src = ("import torch\n\ndef to_gpu(storage, loc):\n    return storage\n\n"
           "a = torch.load(f, map_location=to_gpu)\nb = torch.load(f, map_location=lambda s, l: s.cuda())\n")
    outcome = migrate(src, ["NPU152"])
    assert outcome.new_text is None and codes_at(outcome) == [("NPU152", 6), ("NPU152", 7)]


def test_map_location_unchanged() -> None:
    src = ("import torch\nsd = torch.load(f, map_location={'cpu': 'cpu'})\nsd = torch.load(f, map_location=m)\n"
           "sd = pickle.load(f)\nd = {'cuda:0': 'cuda:1'}\n")
    outcome = migrate(src, ["NPU152"])
    assert outcome.new_text is None and outcome.diagnostics == []


CAPABILITY = [
    ("if torch.cuda.get_device_capability()[0] >= 8:\n    pass\n", "warning", "indexed"),
    ("if torch.cuda.get_device_capability() >= (8, 0):\n    pass\n", "warning", "compared"),
    ("major, minor = torch.cuda.get_device_capability(0)\n", "warning", "unpacked"),
    ("sm = torch.cuda.get_device_capability()\n", "info", "check that"),
    ("ok = torch.npu.get_device_capability() > (7, 0)\n", "warning", "compared"),  # after NPU120 too
    # kept in a name, then used where None breaks (nanochat's compute-dtype probe): the line is named
    ("cap = torch.cuda.get_device_capability()\nif cap >= (8, 0):\n    pass\n", "warning",
     "kept in `cap`, which is compared on line 3"),
    ("cap = torch.cuda.get_device_capability()\nprint(cap)\nsm = cap[0] * 10 + cap[1]\n", "warning",
     "kept in `cap`, which is indexed on line 4"),
    ("cap = torch.cuda.get_device_capability()\nmajor, minor = cap\n", "warning", "unpacked on line 3"),
    ("cap = torch.cuda.get_device_capability()\nif cap is not None:\n    print(cap)\n", "info", "check that"),
    ("cap = torch.cuda.get_device_capability()\nother = x[0] >= (8, 0)\n", "info", "check that"),
]


@pytest.mark.parametrize("line,severity,word", CAPABILITY)
def test_device_capability(line: str, severity: str, word: str) -> None:
    outcome = migrate("import torch\n" + line, ["NPU180"])
    assert codes_at(outcome) == [("NPU180", 2)]
    assert outcome.diagnostics[0].severity.value == severity and word in outcome.diagnostics[0].message


@pytest.mark.parametrize("handler,caught", [
    ("except Exception:", "`except Exception` around it catches"),
    ("except (ImportError, TypeError):", "`except (ImportError, TypeError)` around it catches"),
    ("except:", "`except` around it catches"),
    ("except ImportError:", None),
])
def test_device_capability_inside_a_try_that_catches_it(handler: str, caught: str | None) -> None:
    """nanochat's FA3 probe unpacks the capability inside `try ... except Exception: return None`:
    on NPU the TypeError is caught and the function takes its fallback, which the message says."""
    outcome = migrate("import torch\ndef load():\n    try:\n        major, _ = torch.cuda.get_device_capability()\n"
                      f"        return major\n    {handler}\n        return None\n", ["NPU180"])
    [diagnostic] = outcome.diagnostics
    assert diagnostic.severity.value == "warning" and diagnostic.line == 4
    if caught:
        assert caught in diagnostic.message and "takes its fallback" in diagnostic.message
    else:
        assert "that raises TypeError. Test the feature instead" in diagnostic.message


def test_device_capability_survives_the_default_rules() -> None:
    """NPU120 renames the call to torch.npu.get_device_capability; NPU180 still warns."""
    outcome = migrate("import torch\nif torch.cuda.get_device_capability()[0] >= 8:\n    pass\n")
    assert "torch.npu.get_device_capability()[0]" in outcome.new_text
    assert ("NPU180", 2) in codes_at(outcome)


def test_device_properties_major() -> None:
    outcome = migrate("import torch\nif torch.cuda.get_device_properties(0).major >= 8:\n    pass\n", ["NPU180"])
    assert codes_at(outcome) == [("NPU180", 2)] and outcome.diagnostics[0].severity.value == "warning"


DEVICE_IDS = [
    ('from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=["cuda:0"])\n',
     'm = DDP(model, device_ids=["npu:0"])\n'),
    ("import torch\nm = torch.nn.DataParallel(model, ('cuda:0', 'cuda:1'), 'cuda:0')\n",
     "m = torch.nn.DataParallel(model, ('npu:0', 'npu:1'), 'npu:0')\n"),
    ('import torch\nm = torch.nn.parallel.DistributedDataParallel(model, device_ids=[f"cuda:{rank}"])\n',
     'm = torch.nn.parallel.DistributedDataParallel(model, device_ids=[f"npu:{rank}"])\n'),
    ("import torch\ny = torch.nn.parallel.data_parallel(model, x, ['cuda:0', 'cuda:1'])\n",
     "y = torch.nn.parallel.data_parallel(model, x, ['npu:0', 'npu:1'])\n"),
]


@pytest.mark.parametrize("before,expected", DEVICE_IDS)
def test_device_ids_lists(before: str, expected: str) -> None:
    text = after(before)
    assert text.endswith(expected)
    assert_idempotent(before)


def test_device_ids_unchanged() -> None:
    src = ("import torch\nm = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])\n"
           "x = other(device_ids=['cuda:0'])\nn = torch.nn.DataParallel(model, [0, 1])\n")
    outcome = migrate(src, ["NPU153"])
    assert outcome.new_text is None and outcome.diagnostics == []


def test_the_load_to_cpu_lambda_is_not_reported():
    """DETR's `map_location=lambda storage, loc: storage` keeps storages on the CPU: nothing to do."""
    from codemods.api.registry import all_rules, select_rules
    from npu_migrate.apply.engine import RuleSet, migrate_text

    ruleset = RuleSet(select_rules(all_rules(), select=["NPU152"]))
    quiet = migrate_text("import torch\nw = torch.load(p, map_location=lambda storage, loc: storage)\n",
                         "t.py", ruleset)
    loud = migrate_text("import torch\nw = torch.load(p, map_location=lambda s, loc: s.cuda())\n",
                        "t.py", ruleset)
    assert quiet.diagnostics == [] and [d.code for d in loud.diagnostics] == ["NPU152"]
