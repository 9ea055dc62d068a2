"""NPU130: CUDA AMP becomes the device-generic torch.amp API with "npu"."""


import rule_cases

from codemods.data.tables import load_data
from codemods.rules.npu130_amp_device import DATA

CODES = ["NPU130"]
T = "import torch\n"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


REWRITES = [
    # torch.cuda.amp spelled out
    (T + "with torch.cuda.amp.autocast():\n    pass\n", T + 'with torch.amp.autocast("npu"):\n    pass\n'),
    (T + "with torch.cuda.amp.autocast(True, torch.bfloat16):\n    pass\n",
     T + 'with torch.amp.autocast("npu", enabled=True, dtype=torch.bfloat16):\n    pass\n'),
    (T + "with torch.cuda.amp.autocast(enabled=use_amp, dtype=dt):\n    pass\n",
     T + 'with torch.amp.autocast("npu", enabled=use_amp, dtype=dt):\n    pass\n'),
    ("import torch as th\nctx = th.cuda.amp.autocast(**opts)\n",
     'import torch as th\nctx = th.amp.autocast("npu", **opts)\n'),
    (T + "s = torch.cuda.amp.GradScaler()\n", T + 's = torch.amp.GradScaler("npu")\n'),
    (T + "s = torch.cuda.amp.GradScaler(2.0 ** 10, 2.0, enabled=amp)\n",
     T + 's = torch.amp.GradScaler("npu", 2.0 ** 10, 2.0, enabled=amp)\n'),
    (T + "s = torch.cuda.amp.GradScaler(\n    init_scale=1024,  # small\n)\n",
     T + 's = torch.amp.GradScaler(\n    "npu", init_scale=1024,  # small\n)\n'),
    (T + "@torch.cuda.amp.custom_fwd\ndef f(ctx, x):\n    return x\n",
     T + '@torch.amp.custom_fwd(device_type="npu")\ndef f(ctx, x):\n    return x\n'),
    (T + "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\ndef f(ctx, x):\n    return x\n",
     T + '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="npu")\ndef f(ctx, x):\n    return x\n'),
    (T + "@torch.cuda.amp.custom_bwd\ndef b(ctx, g):\n    return g\n",
     T + '@torch.amp.custom_bwd(device_type="npu")\ndef b(ctx, g):\n    return g\n'),
    (T + "fwd = torch.cuda.amp.custom_fwd(forward)\n", T + 'fwd = torch.amp.custom_fwd(forward, device_type="npu")\n'),
    # imported names and modules
    ("from torch.cuda.amp import autocast, GradScaler\nscaler = GradScaler()\nwith autocast():\n    pass\n",
     'from torch.amp import autocast, GradScaler\nscaler = GradScaler("npu")\nwith autocast("npu"):\n    pass\n'),
    ("from torch.cuda.amp import autocast as amp_autocast\nwith amp_autocast(dtype=d):\n    pass\n",
     'from torch.amp import autocast as amp_autocast\nwith amp_autocast("npu", dtype=d):\n    pass\n'),
    ("from torch.cuda.amp import custom_fwd as my_custom_fwd\n@my_custom_fwd\ndef f(ctx):\n    pass\n",
     'from torch.amp import custom_fwd as my_custom_fwd\n@my_custom_fwd(device_type="npu")\ndef f(ctx):\n    pass\n'),
    ("from torch.cuda.amp import custom_fwd\n@custom_fwd\ndef f(ctx):\n    pass\n",
     'from torch.amp import custom_fwd\n@custom_fwd(device_type="npu")\ndef f(ctx):\n    pass\n'),
    ("from torch.cuda import amp\nwith amp.autocast(enabled=False):\n    pass\n",
     'from torch import amp\nwith amp.autocast("npu", enabled=False):\n    pass\n'),
    ("import torch.cuda.amp as amp\ns = amp.GradScaler()\n", 'import torch.amp as amp\ns = amp.GradScaler("npu")\n'),
    ("from torch.cuda import amp, synchronize\ns = amp.GradScaler()\n",
     'from torch.cuda import synchronize; from torch import amp\ns = amp.GradScaler("npu")\n'),
    # device-generic spellings with a CUDA device
    (T + 'with torch.autocast("cuda"):\n    pass\n', T + 'with torch.autocast("npu"):\n    pass\n'),
    (T + "with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n    pass\n",
     T + "with torch.autocast(device_type='npu', dtype=torch.bfloat16):\n    pass\n"),
    (T + 'with torch.amp.autocast(device_type="cuda"):\n    pass\n',
     T + 'with torch.amp.autocast(device_type="npu"):\n    pass\n'),
    (T + 'with torch.autocast("cuda" if torch.cuda.is_available() else "cpu"):\n    pass\n',
     T + 'with torch.autocast("npu" if torch.cuda.is_available() else "cpu"):\n    pass\n'),
    ("from torch import autocast\nwith autocast('cuda'):\n    pass\n",
     "from torch import autocast\nwith autocast('npu'):\n    pass\n"),
    (T + 's = torch.amp.GradScaler("cuda")\n', T + 's = torch.amp.GradScaler("npu")\n'),
    (T + 's = torch.GradScaler(device="cuda", init_scale=8)\n', T + 's = torch.GradScaler(device="npu", init_scale=8)\n'),
    (T + "s = torch.amp.GradScaler()\n", T + 's = torch.amp.GradScaler("npu")\n'),
    (T + "s = torch.GradScaler(enabled=True)\n", T + 's = torch.GradScaler("npu", enabled=True)\n'),
    (T + '@torch.amp.custom_fwd(device_type="cuda")\ndef f(ctx):\n    pass\n',
     T + '@torch.amp.custom_fwd(device_type="npu")\ndef f(ctx):\n    pass\n'),
    (T + "on = torch.is_autocast_enabled()\n", T + 'on = torch.is_autocast_enabled("npu")\n'),
    (T + 'd = torch.get_autocast_dtype("cuda")\n', T + 'd = torch.get_autocast_dtype("npu")\n'),
    (T + "d = torch.get_autocast_gpu_dtype()\n", T + 'd = torch.get_autocast_dtype("npu")\n'),
    (T + "torch.set_autocast_gpu_dtype(torch.bfloat16)\n", T + 'torch.set_autocast_dtype("npu", torch.bfloat16)\n'),
]

UNCHANGED = [
    T + 'with torch.autocast("cpu"):\n    pass\n',
    T + 'with torch.autocast(device_type=device.type):\n    pass\n',
    T + 's = torch.amp.GradScaler("npu")\n',
    T + 'with torch.cpu.amp.autocast():\n    pass\n',
    T + 'on = torch.is_autocast_enabled("cpu")\n',
    "from apex import amp\nmodel, opt = amp.initialize(model, opt)\n",
    "def autocast():\n    pass\nwith autocast():\n    pass\n",
    'print("use torch.cuda.amp.autocast")\n',
    T + "s = torch.amp.GradScaler(**kwargs)\n",  # the device may be in kwargs
]


test_rewrites, test_idempotent, test_unchanged = rule_cases.table_tests(_RULES, REWRITES, UNCHANGED)


def test_imported_name_used_without_a_call_blocks_the_move_and_is_reported():
    src = ("from torch.cuda.amp import autocast\n"
           "ctx = autocast if use_amp else nullcontext\n"
           "with autocast():\n"
           "    pass\n")
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU130", 1)]
    assert "line 2" in outcome.diagnostics[0].message


def test_alias_the_migration_cannot_follow_is_reported():
    """`ac(...)` calls hold no AMP word, so their statements are never parsed: moving the
    import would leave them without a device."""
    src = "from torch.cuda.amp import autocast as ac\n\n\ndef f():\n    with ac():\n        pass\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU130", 1)]
    assert "`ac`" in outcome.diagnostics[0].message


def test_module_alias_with_other_members_is_reported():
    outcome = migrate("from torch.cuda import amp\nm = amp.common.amp_definitely_not_available()\n")
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU130", 1)]


def test_spelled_out_reference_is_reported():
    outcome = migrate(T + "ctx = torch.cuda.amp.autocast\nwith torch.cuda.amp.autocast():\n    pass\n")
    assert outcome.new_text == T + 'ctx = torch.cuda.amp.autocast\nwith torch.amp.autocast("npu"):\n    pass\n'
    assert [(d.code, d.line, d.col) for d in outcome.diagnostics] == [("NPU130", 2, 7)]


def test_star_args_of_autocast_are_reported():
    outcome = migrate(T + "with torch.cuda.amp.autocast(*flags):\n    pass\n")
    assert outcome.new_text is None
    assert "by hand" in outcome.diagnostics[0].message


def test_amp_table_follows_the_coverage_schema():
    data = load_data(DATA)
    for entry in data["entries"]:
        assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys()
        assert entry["code"] == "NPU130"
