"""NPU190: the module-device-constant rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.analyses.constantflow import ConstantFlow
from codemods.analyses.devices import device_expr, device_positions
from codemods.analyses.portable import generic_device_value
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from codemods.model.cstnodes import string_value
from npu_migrate.core.diagnostics import Severity


class ModuleDeviceConstant(CoverageRule):
    """## What it does

    `DEVICE = "cuda"` at module level becomes `"npu"` when every use of it is a device

    ## Why

    A module-level constant such as `DEVICE = "cuda"` is no device position by itself, so NPU103 does
    not touch it (it handles device-named assignments inside functions and classes); `transfer_to_npu`
    only rewrites strings at the moment they reach a wrapped function. The rule follows the constant
    through the whole file (Python's `ast`, once per file, so the decision does not depend on which
    chunk the engine parses) and rewrites the assignment when it is assigned once, never shadowed
    (`global`, a parameter of the same name), and **every** use is a device: a device position of the
    device table (`codemods/data/device_positions*.json`: keywords such as `device=`, positions of
    `torch.device`, `.to()`, ...), an `f"{DEVICE}:{rank}"` template there, a comparison with a device
    or (under a device-like name, which NPU104 rewrites too) with `"cuda"`, a device-named assignment,
    parameter default or dict entry, or an argparse `--device` default/choice. Logging and `print`
    neither count nor block. A constant no code in the file uses is rewritten only when its name says
    device (a settings module). Any other use keeps the constant and is reported with its line.

    ## Example

    ```python
    # before
    DEVICE = "cuda"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")

    CKPT = "cuda"
    path = os.path.join("ckpt", CKPT)
    # after
    DEVICE = "npu"
    x = torch.zeros(8, device=DEVICE)
    model.to(f"{DEVICE}:{rank}")

    CKPT = "cuda"
    path = os.path.join("ckpt", CKPT)    # reported: the constant also names a path
    ```

    ## Fix safety

    Safe: rewritten only when every use in the file is a device. Uses in other modules (`from config import DEVICE`) cannot be seen; a device-named constant unused in its own file is assumed to be a setting for them. Suppress a line with `# npu-migrate: ignore[NPU190]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: the constant becomes the run's device, `DEVICE.type` (`f"{DEVICE.type}:1"` for an index; `PORTABLE_DEVICE` where the file binds `DEVICE` itself), when every use is a device and the file imports torch; otherwise reported
    """

    code = "NPU190"
    prefilter_in_code = True
    name = "module-device-constant"
    summary = "`DEVICE = \"cuda\"` at module level becomes `\"npu\"` when every use of it is a device"
    supported_targets = frozenset({"npu", "portable"})
    fix = Fix.SAFE
    # `import torch_npu` is asked for only where the file uses torch: a settings module holding
    # nothing but `DEVICE = "cuda"` should not start importing the NPU backend
    needs_torch_npu = False
    severity = Severity.WARNING
    prefilter = r"""['"]cuda(?::\d+)?['"]"""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._flow: ConstantFlow | None = None
        self.top: set[int] = set()

    @property
    def flow(self) -> ConstantFlow:
        if self._flow is None:
            self._flow = self.context.model.derived(ConstantFlow, device_positions())
        return self._flow

    def visit_Module(self, node: cst.Module) -> None:
        # A chunk's top-level statement is a module-level one, or a statement of a function or
        # class body handed over on its own; only a name the whole file assigns exactly once,
        # at module level (facts.constants), can be the former, so the check below is exact.
        self.top = {id(small) for stmt in node.body if isinstance(stmt, cst.SimpleStatementLine)
                    for small in stmt.body}

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> Any:
        if id(original_node) not in self.top or len(original_node.targets) != 1:
            return updated_node
        target = original_node.targets[0].target
        if not isinstance(target, cst.Name) or target.value not in self.flow.candidates:
            return updated_node
        if string_value(original_node.value) != self.context.facts.constants.get(target.value):
            return updated_node
        action, why = self.flow.decision(target.value)
        if action == "report":
            to = "`DEVICE.type`" if self.target == "portable" else "\"npu\""
            self.report(original_node, f"`{target.value}` holds a CUDA device but is not only used as one "
                        f"({why}): set it to {to} by hand if that use is a device too")
            return updated_node
        if action != "rewrite":
            return updated_node
        if self.target == "portable":
            return self._portable(original_node, updated_node, target.value, why)
        new = device_expr(updated_node.value)
        if new is None:
            return updated_node
        self.fixed(original_node, f"`{target.value}` → \"npu\" device ({why})")
        if any(t == "torch" or t.startswith("torch.") for t in self.context.facts.aliases.values()):
            self.context.require_import("torch_npu")
        return updated_node.with_changes(value=new)


    def _portable(self, original: cst.Assign, updated: cst.Assign, name: str, why: str) -> Any:
        """`device = "cuda"` -> `device = DEVICE.type`: the run's device, the CPU without an
        accelerator. A file that does not import torch (a settings module) is reported: the
        device value would make it import torch."""
        uses_torch = any(t == "torch" or t.startswith("torch.") for t in self.context.facts.aliases.values())
        new = generic_device_value(self.context, updated.value) if uses_torch else None
        if new is None:
            self.report(original, f"`{name}` holds a CUDA device ({why}); under --target portable set it "
                                  "from `torch.accelerator.current_accelerator()` by hand")
            return updated
        self.fixed(original, f"`{name}` → the run's device ({why})")
        return updated.with_changes(value=new)


CASES = [
    Invalid(  # the run's device: the GPU, the NPU, or the CPU where there is no accelerator
        """\
        import torch
        device = "cuda"
        DEVICE = "cuda:0"
        x = torch.zeros(8, device=device)
        y = torch.ones(2).to(DEVICE)
    """,
        after="""\
        import torch
        PORTABLE_DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
        device = PORTABLE_DEVICE.type
        DEVICE = f"{PORTABLE_DEVICE.type}:0"
        x = torch.zeros(8, device=device)
        y = torch.ones(2).to(DEVICE)
    """,
        codes=("NPU100", "NPU190"),
        options=(("target", "portable"),),
    ),
    Invalid(  # a settings module without torch: reported, no torch import is added
        """\
        DEVICE = "cuda"
        def place(x):
            return x.to(DEVICE)
    """,
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
        import os
        import torch
        DEVICE = "cuda"
        x = torch.zeros(8, device=DEVICE)
        model.to(f"{DEVICE}:{rank}")
    """,
        after="""\
        import os
        import torch
        import torch_npu  # noqa: F401
        DEVICE = "npu"
        x = torch.zeros(8, device=DEVICE)
        model.to(f"{DEVICE}:{rank}")
    """,
        codes=('NPU100', 'NPU190'),
    ),
    Valid(
        """\
        import os
        import torch
        import torch_npu  # noqa: F401
        DEVICE = "npu"
        x = torch.zeros(8, device=DEVICE)
        model.to(f"{DEVICE}:{rank}")
    """,
    ),
    Invalid(
        """\
    import torch
    DEVICE = "cuda"
    x = torch.zeros(2, device=DEVICE)
    m = model.to(DEVICE)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    DEVICE = "npu"
    x = torch.zeros(2, device=DEVICE)
    m = model.to(DEVICE)
    """,
        codes=('NPU100', 'NPU190'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    import logging
    GPU = 'cuda:0'
    d = torch.device(GPU)
    logging.info(f'on {GPU}')
    print('device', GPU)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    import logging
    GPU = 'npu:0'
    d = torch.device(GPU)
    logging.info(f'on {GPU}')
    print('device', GPU)
    """,
        codes=('NPU100', 'NPU190'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    DEVICE = "cuda"
    m = model.to(f"{DEVICE}:{rank}")
    if DEVICE == "cuda":
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    DEVICE = "npu"
    m = model.to(f"{DEVICE}:{rank}")
    if DEVICE == "npu":
        pass
    """,
        codes=('NPU100', 'NPU104', 'NPU190'),
        with_rules=('NPU104', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    DEV = "cuda"


    class Trainer:
        def __init__(self, device=DEV):
            self.device = DEV
            self.cfg = {"device": DEV}
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    DEV = "npu"


    class Trainer:
        def __init__(self, device=DEV):
            self.device = DEV
            self.cfg = {"device": DEV}
    """,
        codes=('NPU100', 'NPU190'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import argparse
    DEFAULT_DEVICE = "cuda"
    p = argparse.ArgumentParser()
    p.add_argument("--device", default=DEFAULT_DEVICE, choices=[DEFAULT_DEVICE, "cpu"])
    """,
        after="""\
    import argparse
    DEFAULT_DEVICE = "npu"
    p = argparse.ArgumentParser()
    p.add_argument("--device", default=DEFAULT_DEVICE, choices=[DEFAULT_DEVICE, "cpu"])
    """,
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    TRAIN_DEVICE = "cuda"
    BATCH = 8
    """,
        after="""\
    TRAIN_DEVICE = "npu"
    BATCH = 8
    """,
        with_rules=('NPU100',),
    ),
    Valid(
        """\
    BACKEND_NAME = "cuda"
    """,
    ),
    Valid(
        """\
    DEVICE = "cuda"
    DEVICE = "cpu"
    """,
    ),
    Valid(
        """\
    DEVICE = "cuda"


    def f(DEVICE):
        return DEVICE
    """,
    ),
    Valid(
        """\
    DEVICE = "cuda"


    def f():
        global DEVICE
        DEVICE = "cpu"
    """,
    ),
    Valid(
        """\
    LABEL = "cuda kernels"
    x = torch.zeros(2, device="cpu")
    """,
    ),
]
