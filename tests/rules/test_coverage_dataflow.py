"""NPU190 module-level device constants followed through the file; NPU191 other comparisons
with "cuda"."""

from __future__ import annotations

import pytest
from rule_cases import codes_at, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

DEVICE_RULES = ["NPU103", "NPU104", "NPU105", "NPU190"]

REWRITES = [
    # every use is a device position
    ('import torch\nDEVICE = "cuda"\nx = torch.zeros(2, device=DEVICE)\nm = model.to(DEVICE)\n',
     'import torch\nimport torch_npu  # noqa: F401\nDEVICE = "npu"\nx = torch.zeros(2, device=DEVICE)\n'
     'm = model.to(DEVICE)\n'),
    # an index is kept; f-string device templates, torch.device, comparisons, logging
    ("import torch\nimport logging\nGPU = 'cuda:0'\nd = torch.device(GPU)\nlogging.info(f'on {GPU}')\n"
     "print('device', GPU)\n",
     "import torch\nimport torch_npu  # noqa: F401\nimport logging\nGPU = 'npu:0'\nd = torch.device(GPU)\n"
     "logging.info(f'on {GPU}')\nprint('device', GPU)\n"),
    ('import torch\nDEVICE = "cuda"\nm = model.to(f"{DEVICE}:{rank}")\nif DEVICE == "cuda":\n    pass\n',
     'import torch\nimport torch_npu  # noqa: F401\nDEVICE = "npu"\nm = model.to(f"{DEVICE}:{rank}")\n'
     'if DEVICE == "npu":\n    pass\n'),
    # device-named targets, parameter defaults, dict entries and argparse options are devices
    ('import torch\nDEV = "cuda"\n\n\nclass Trainer:\n    def __init__(self, device=DEV):\n'
     '        self.device = DEV\n        self.cfg = {"device": DEV}\n',
     'import torch\nimport torch_npu  # noqa: F401\nDEV = "npu"\n\n\nclass Trainer:\n    def __init__(self, device=DEV):\n'
     '        self.device = DEV\n        self.cfg = {"device": DEV}\n'),
    ('import argparse\nDEFAULT_DEVICE = "cuda"\np = argparse.ArgumentParser()\n'
     'p.add_argument("--device", default=DEFAULT_DEVICE, choices=[DEFAULT_DEVICE, "cpu"])\n',
     'import argparse\nDEFAULT_DEVICE = "npu"\np = argparse.ArgumentParser()\n'
     'p.add_argument("--device", default=DEFAULT_DEVICE, choices=[DEFAULT_DEVICE, "cpu"])\n'),
    # not used in this file, but its name says device (a config module)
    ('TRAIN_DEVICE = "cuda"\nBATCH = 8\n', 'TRAIN_DEVICE = "npu"\nBATCH = 8\n'),
]

KEPT = [  # (source, line of the assignment, line of the use that keeps it)
    # used as something that is no device: a path
    ('import os\nDEVICE = "cuda"\np = os.path.join("ckpt", DEVICE)\n', 2, 3),
    # compared with "cuda" under a name NPU104 does not know as a device
    ('ACCEL = "cuda"\nif ACCEL == "cuda":\n    pass\n', 1, 2),
    # passed positionally to a function that takes no device there
    ('DEVICE = "cuda"\nrun(DEVICE)\n', 1, 2),
]

UNTOUCHED = [
    'BACKEND_NAME = "cuda"\n',  # not used and not named like a device
    'DEVICE = "cuda"\nDEVICE = "cpu"\n',  # not a constant
    'DEVICE = "cuda"\n\n\ndef f(DEVICE):\n    return DEVICE\n',  # shadowed by a parameter
    'DEVICE = "cuda"\n\n\ndef f():\n    global DEVICE\n    DEVICE = "cpu"\n',  # rebound
    'LABEL = "cuda kernels"\nx = torch.zeros(2, device="cpu")\n',  # no device string
]


@pytest.mark.parametrize("before,expected", REWRITES)
def test_rewrites(before: str, expected: str) -> None:
    assert after(before, DEVICE_RULES) == expected
    assert_idempotent(before, DEVICE_RULES)


@pytest.mark.parametrize("src,line,use", KEPT)
def test_kept_and_reported(src: str, line: int, use: int) -> None:
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU190", line)]
    assert f"line {use}:" in outcome.diagnostics[0].message and "by hand" in outcome.diagnostics[0].message


@pytest.mark.parametrize("src", UNTOUCHED)
def test_untouched(src: str) -> None:
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None and outcome.diagnostics == []


def test_assignment_in_a_class_body_is_not_a_module_constant() -> None:
    """The engine may parse a class body statement on its own: `device = "cuda"` there is
    NPU103's (a device-named assignment), never NPU190's."""
    src = 'import torch\n\n\nclass Cfg:\n    x = 1\n    other = "cuda"\n    y = 2\n'
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None and outcome.diagnostics == []


def test_decision_uses_the_whole_file_across_chunks() -> None:
    """The assignment and its uses sit in different top-level statements (chunks)."""
    src = ('import torch\n\nDEVICE = "cuda"\n\n\ndef build():\n    return Net().to(DEVICE)\n\n\n'
           'def save(m):\n    torch.save(m, "ckpt_" + DEVICE + ".pt")\n')
    outcome = migrate(src, ["NPU190"])
    assert outcome.new_text is None
    assert codes_at(outcome) == [("NPU190", 3)]
    assert "line 11" in outcome.diagnostics[0].message


COMPARISONS = [
    ('if args.accelerator == "cuda":\n    pass\n', [("NPU191", 1)]),
    ('ok = "cuda" in backends\n', [("NPU191", 1)]),
    ('if name.startswith("cuda"):\n    pass\n', [("NPU191", 1)]),
    ('if x.device.type == "cuda":\n    pass\n', []),  # NPU104 rewrites it
    ('if str(device).startswith("cuda"):\n    pass\n', []),  # NPU104 too
    ('if backend == "nccl":\n    pass\n', []),  # NPU14x's
    ('if kind == "cudagraph":\n    pass\n', []),  # not a device string
]


@pytest.mark.parametrize("src,expected", COMPARISONS)
def test_other_comparisons(src: str, expected: list) -> None:
    outcome = migrate(src, ["NPU191"])
    assert outcome.new_text is None and codes_at(outcome) == expected
