"""NPU172: the autograd-profiler-use-cuda rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule

_AUTOGRAD_PROFILE = frozenset({"torch.autograd.profiler.profile", "torch.autograd.profile"})


_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class AutogradProfilerUseCuda(CoverageRule):
    """## What it does

    `torch.autograd.profiler.profile(use_cuda=True)` becomes `use_device="npu"`

    ## Why

    `torch.autograd.profiler.profile(use_cuda=True)` records nothing on the NPU; the supported form is
    `use_device="npu"` (✔ on A2/A3, `pytorch_2-12-0/torch-autograd.md`), and `transfer_to_npu` does
    not rewrite it (fact sheet §1.6). `use_cuda=True` becomes `use_device="npu"`, `use_cuda=False` (the
    default) is removed, and a computed flag becomes `use_device="npu" if flag else None`.
    `use_device="cuda"` is rewritten by NPU103 (a device position of `device_positions_extra.json`).

    ## Example

    ```python
    # before
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        model(x)
    # after
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        model(x)
    ```

    ## Fix safety

    Safe: the same events, recorded for the NPU. Suppress a line with `# npu-migrate: ignore[NPU172]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: kept (info): `use_cuda=True` runs on every build (CPU profiling off CUDA); `use_device="npu"` would fail off Ascend
    """

    code = "NPU172"
    portable_keeps = ('`use_cuda=True` is accepted on every build and profiles the CPU where there is no CUDA; the npu target\'s `use_device="npu"` fails off Ascend')
    name = "autograd-profiler-use-cuda"
    summary = "`torch.autograd.profiler.profile(use_cuda=True)` becomes `use_device=\"npu\"`"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"\buse_cuda\b"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) not in _AUTOGRAD_PROFILE:
            return updated_node
        args = list(updated_node.args)
        for index, arg in enumerate(args):
            if arg.keyword is None or arg.keyword.value != "use_cuda":
                continue
            value = arg.value
            if isinstance(value, cst.Name) and value.value == "False":
                if index == len(args) - 1 and index:
                    args[index - 1] = args[index - 1].with_changes(comma=arg.comma)
                del args[index]
                self.fixed(original_node, "`use_cuda=False` dropped (the default)")
            else:
                npu = cst.SimpleString('"npu"')
                new = npu if isinstance(value, cst.Name) and value.value == "True" else \
                    cst.IfExp(test=value, body=npu, orelse=cst.Name("None"))
                args[index] = arg.with_changes(keyword=cst.Name("use_device"), value=new,
                                               equal=arg.equal if arg.equal is not cst.MaybeSentinel.DEFAULT
                                               else _EQUAL)
                self.fixed(original_node, "`use_cuda=` → `use_device=\"npu\"`")
            return updated_node.with_changes(args=args)
        return updated_node


CASES = [
    Invalid(
        """\
    import os
    import torch
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        model(x)
    """,
        after="""\
    import os
    import torch
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        model(x)
    """,
    ),
    Valid(
        """\
    import os
    import torch
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        model(x)
    """,
    ),
    Invalid(
        """\
    import torch
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        pass
    """,
        codes=('NPU100', 'NPU172'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    with torch.autograd.profiler.profile(record_shapes=True, use_cuda=False) as prof:
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    with torch.autograd.profiler.profile(record_shapes=True) as prof:
        pass
    """,
        codes=('NPU100', 'NPU172'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.autograd import profiler
    with profiler.profile(use_cuda=args.gpu, with_stack=True):
        pass
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch.autograd import profiler
    with profiler.profile(use_device="npu" if args.gpu else None, with_stack=True):
        pass
    """,
        codes=('NPU100', 'NPU172'),
        with_rules=('NPU100',),
    ),
]
