"""NPU170: the nvtx-to-mstx rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_profiler.json"


_NVTX_RANGE = "torch.cuda.nvtx.range"


class NvtxToMstx(NameMapRule):
    """## What it does

    `torch.cuda.nvtx.*` ranges and marks become `torch_npu.npu.mstx.*`

    ## Why

    `torch.cuda.nvtx` ranges do nothing on an Ascend machine, and `transfer_to_npu` does not map them
    (fact sheet §1.6, §2.6). The NPU counterpart is `torch_npu.npu.mstx`: `mark`, `range_start`,
    `range_end` (all releases), `range_push`, `range_pop` and the context manager / decorator
    `annotate` (torch_npu 26.x and later: an info note says so). `nvtx.range(msg)` becomes
    `mstx.annotate(msg)`; a `range` call with format arguments is reported, since `annotate` takes a
    finished message. `from torch.cuda import nvtx` becomes `from torch_npu.npu import mstx as nvtx`,
    so the uses keep their name (only renamed members such as `range` change). Unknown members are
    reported. `torch_npu.npu.mstx` is a class, not a module, so its members cannot be imported by name:
    `from torch.cuda.nvtx import range_push` is reported with the module import to use instead.

    ## Example

    ```python
    # before
    from torch.cuda import nvtx
    nvtx.range_start("forward")
    with nvtx.range("step"):
        ...
    # after
    from torch_npu.npu import mstx as nvtx
    nvtx.range_start("forward")
    with nvtx.annotate("step"):
        ...
    ```

    ## Fix safety

    Safe: the same markers, recorded by the Ascend profiling tools (msprof, torch_npu.profiler) instead of Nsight. Suppress a line with `# npu-migrate: ignore[NPU170]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU170"
    name = "nvtx-to-mstx"
    summary = "`torch.cuda.nvtx.*` ranges and marks become `torch_npu.npu.mstx.*`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU170")

    def visit_Call(self, node: cst.Call) -> None:
        # nvtx.range(msg, *args, **kwargs) formats msg; mstx.annotate takes the message only
        if self.resolve(node.func) == _NVTX_RANGE and (len(node.args) != 1 or node.args[0].keyword):
            self.vetoed.add(id(node.func))
            self.tree.nodes("formatted").add(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if original_node in self.tree.nodes("formatted"):
            self.report(original_node, "nvtx.range formats its message with the extra arguments; "
                        "mstx.annotate takes a finished message: write "
                        "`torch_npu.npu.mstx.annotate(msg.format(...))`", severity=Severity.WARNING)
        return updated_node


CASES = [
    Invalid(
        """\
        import os
        import torch
        from torch.cuda import nvtx
        nvtx.range_start("forward")
        with nvtx.range("step"):
            ...
    """,
        after="""\
        import os
        import torch
        from torch_npu.npu import mstx as nvtx
        nvtx.range_start("forward")
        with nvtx.annotate("step"):
            ...
    """,
    ),
    Valid(
        """\
        import os
        import torch
        from torch_npu.npu import mstx as nvtx
        nvtx.range_start("forward")
        with nvtx.annotate("step"):
            ...
    """,
    ),
    Invalid(
        """\
    import torch
    torch.cuda.nvtx.range_start('a')
    torch.cuda.nvtx.mark('m')
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch_npu.npu.mstx.range_start('a')
    torch_npu.npu.mstx.mark('m')
    """,
        codes=('NPU100', 'NPU170'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.cuda import nvtx
    nvtx.range_start('fwd')
    nvtx.mark('x')
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu import mstx as nvtx
    nvtx.range_start('fwd')
    nvtx.mark('x')
    """,
        codes=('NPU100', 'NPU170'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch.cuda.nvtx as nv
    nv.range_end(3)
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu import mstx as nv
    nv.range_end(3)
    """,
        codes=('NPU100', 'NPU170'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.cuda import nvtx
    with nvtx.range('step'):
        pass
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu import mstx as nvtx
    with nvtx.annotate('step'):
        pass
    """,
        codes=('NPU100', 'NPU170'),
        with_rules=('NPU100',),
    ),
]
