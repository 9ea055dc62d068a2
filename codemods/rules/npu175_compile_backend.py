"""NPU175: the compile-backend rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.analyses.portable import device_type, portable_ok
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.data.tables import load_data
from codemods.families.namemap import CoverageRule
from codemods.model.cstnodes import string_value, with_string
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_graphs.json"


_COMPILE = frozenset({"torch.compile"})


_DYNAMO = frozenset({"torch._dynamo.optimize"})


class CompileBackend(CoverageRule):
    """## What it does

    `torch.compile(backend="cudagraphs")` becomes `backend="npugraphs"`

    ## Why

    `torch.compile(backend="cudagraphs")` has an NPU twin: torch_npu registers the dynamo backends
    `npu`, `npugraph_ex` and `npugraphs`, and the support list says `npugraphs` equals `cudagraphs`
    (fact sheet §2.4). `transfer_to_npu` leaves the string alone. The rule rewrites the `backend=` of
    `torch.compile` and the backend of `torch._dynamo.optimize(...)`; the strings are data
    (`compile_backends` in `codemods/data/coverage_graphs.json`). TensorRT backends are reported: they
    are NVIDIA-only. `mode="reduce-overhead"` needs no change (inductor on NPU supports it).

    ## Example

    ```python
    # before
    model = torch.compile(model, backend="cudagraphs")
    # after
    model = torch.compile(model, backend="npugraphs")
    ```

    ## Fix safety

    Safe: the same graph-capture backend for the NPU. Suppress a line with `# npu-migrate: ignore[NPU175]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: `backend="cudagraphs"` becomes `{"cuda": "cudagraphs", "npu": "npugraphs"}.get(DEVICE.type, "eager")`: each device's graph backend, and "eager" elsewhere (what cudagraphs does with CPU tensors); TensorRT backends are reported as for npu
    """

    code = "NPU175"
    supported_targets = frozenset({"npu", "portable"})
    name = "compile-backend"
    summary = "`torch.compile(backend=\"cudagraphs\")` becomes `backend=\"npugraphs\"`"
    fix = Fix.SAFE
    needs_torch_npu = True
    prefilter = r"cudagraphs|tensorrt"
    gate_names = _COMPILE | _DYNAMO

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        data = load_data(DATA)
        self.backends: dict[str, str] = data["compile_backends"]
        self.flags: dict[str, str] = data["compile_backend_flags"]

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        qualified = self.resolve(original_node.func)
        if qualified not in _COMPILE and qualified not in _DYNAMO:
            return updated_node
        args = list(updated_node.args)
        for index, (orig, arg) in enumerate(zip(original_node.args, args)):
            is_backend = (arg.keyword is not None and arg.keyword.value == "backend") or (
                qualified in _DYNAMO and index == 0 and arg.keyword is None and not arg.star)
            value = string_value(orig.value) if is_backend else None
            if value in self.flags:
                self.report(orig.value, self.flags[value], severity=Severity.WARNING)
            elif value in self.backends and isinstance(arg.value, cst.SimpleString) and self.target == "portable":
                chosen = self._by_device(arg.value, value)
                if chosen is None:
                    self.report(orig.value, f"backend `\"{value}\"` is CUDA's: under --target portable choose the "
                                            "backend by `DEVICE.type` by hand", severity=Severity.WARNING)
                    return updated_node
                args[index] = arg.with_changes(value=chosen)
                self.fixed(orig.value, f"backend `\"{value}\"` → chosen by the device type")
                return updated_node.with_changes(args=args)
            elif value in self.backends and isinstance(arg.value, cst.SimpleString):
                args[index] = arg.with_changes(value=with_string(arg.value, self.backends[value]))
                self.fixed(orig.value, f"backend `\"{value}\"` → `\"{self.backends[value]}\"`")
                return updated_node.with_changes(args=args)
        return updated_node


    def _by_device(self, string: cst.SimpleString, value: str) -> cst.BaseExpression | None:
        """`{"cuda": "cudagraphs", "npu": "npugraphs"}.get(DEVICE.type, "eager")`: each device's
        graph backend; elsewhere "eager", which is what cudagraphs does with CPU tensors."""
        kind = device_type(self.context) if portable_ok(self.context.options) else None
        if kind is None:
            return None
        quote = string.quote
        table = cst.parse_expression(f'{{{quote}cuda{quote}: {quote}{value}{quote}, '
                                     f'{quote}npu{quote}: {quote}{self.backends[value]}{quote}}}')
        return cst.Call(func=cst.Attribute(value=table, attr=cst.Name("get")),
                        args=[cst.Arg(kind, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                              cst.Arg(cst.SimpleString(f"{quote}eager{quote}"))])


CASES = [
    Invalid(
        """\
    import torch
    model = torch.compile(model, backend="cudagraphs")
    """,
        after="""\
    import torch
    DEVICE = torch.accelerator.current_accelerator() or torch.device("cpu")
    model = torch.compile(model, backend={"cuda": "cudagraphs", "npu": "npugraphs"}.get(DEVICE.type, "eager"))
    """,
        codes=("NPU100", "NPU175"),
        options=(("target", "portable"),),
    ),
    Invalid(
        """\
    import os
    import torch
    model = torch.compile(model, backend="cudagraphs")
    """,
        after="""\
    import os
    import torch
    model = torch.compile(model, backend="npugraphs")
    """,
    ),
    Valid(
        """\
    import os
    import torch
    model = torch.compile(model, backend="npugraphs")
    """,
    ),
    Invalid(
        """\
    import torch
    m = torch.compile(model, backend='cudagraphs')
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    m = torch.compile(model, backend='npugraphs')
    """,
        codes=('NPU100', 'NPU175'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    m = torch.compile(model, mode="max-autotune", backend="cudagraphs", fullgraph=True)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    m = torch.compile(model, mode="max-autotune", backend="npugraphs", fullgraph=True)
    """,
        codes=('NPU100', 'NPU175'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch._dynamo as dynamo
    m = dynamo.optimize("cudagraphs")(model)
    """,
        after="""\
    import torch_npu  # noqa: F401
    import torch._dynamo as dynamo
    m = dynamo.optimize("npugraphs")(model)
    """,
        codes=('NPU100', 'NPU175'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    @torch.compile(backend='cudagraphs')
    def f(x):
        return x
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    @torch.compile(backend='npugraphs')
    def f(x):
        return x
    """,
        codes=('NPU100', 'NPU175'),
        with_rules=('NPU100',),
    ),
]
