"""NPU176: the cuda-graphs rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter

DATA = "coverage_graphs.json"


class CudaGraphs(NameMapRule):
    """## What it does

    `torch.cuda.CUDAGraph` / `graph` / `make_graphed_callables` become NPU graphs (inference only)

    ## Why

    `torch.cuda.CUDAGraph` becomes `torch.npu.NPUGraph` (what `transfer_to_npu` patches in), and
    `torch.cuda.graph` / `make_graphed_callables` (and the same names in `torch.cuda.graphs`) become
    their `torch.npu` twins; the other graph helpers are NPU120's. Each rewrite carries a warning:
    NPU graphs are supported for **inference only**, not training (torch_npu support list,
    `torch-cuda.md`), so capture forward passes under `torch.no_grad()`; `make_graphed_callables`
    records backward graphs too. `torch.cuda.graph`'s arguments are NPU177's.

    ## Example

    ```python
    # before
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static_in)
    # after (warning at both lines: inference only)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = model(static_in)
    ```

    ## Fix safety

    Safe as a rename; the warning asks the user to check that the captured code is inference. Suppress a line with `# npu-migrate: ignore[NPU176]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU176"
    name = "cuda-graphs"
    summary = "`torch.cuda.CUDAGraph` / `graph` / `make_graphed_callables` become NPU graphs (inference only)"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU176")


CASES = [
    Invalid(
        """\
    import os
    import torch
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static_in)
    """,
        after="""\
    import os
    import torch
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = model(static_in)
    """,
    ),
    Valid(
        """\
    import os
    import torch
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = model(static_in)
    """,
    ),
    Invalid(
        """\
    import torch
    with torch.cuda.graph(g, pool, stream, 'thread_local'):
        pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    with torch.npu.graph(g, pool, stream, capture_error_mode='thread_local'):
        pass
    """,
        codes=('NPU100', 'NPU176', 'NPU177'),
        with_rules=('NPU177', 'NPU100'),
    ),
]
