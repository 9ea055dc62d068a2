"""NPU155: the cuda-memory-submodule rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter

DATA = "coverage_memory.json"


class CudaMemorySubmodule(NameMapRule):
    """## What it does

    `torch.cuda.memory.<fn>` (reached through the submodule) becomes `torch.npu.memory.<fn>`

    ## Why

    `transfer_to_npu` rebinds the names of `torch_npu.npu.__all__` on `torch.cuda`, and of
    `torch.cuda.memory` only `_record_memory_history`, `_snapshot` and (master) `_dump_snapshot`. Every
    other `torch.cuda.memory.<fn>` reached through the submodule stays the CUDA function and fails on
    an Ascend machine (fact sheet §1.6). torch_npu has the same functions in `torch.npu.memory`
    (`mem_get_info` lives in `torch.npu` itself). The rule rewrites uses spelled from `torch`, and
    repoints `from torch.cuda.memory import X`, `from torch.cuda import memory` and
    `import torch.cuda.memory as m` at `torch_npu.npu.memory` (imports name the real package:
    `torch.npu` is only an alias registered at run time). Members without an NPU counterpart
    (`list_gpu_processes`, `caching_allocator_enable`, ...) are reported with what to do instead;
    `CUDAPluggableAllocator` becomes `NPUPluggableAllocator` with a warning that the shared library
    must be rebuilt for Ascend. `torch.cuda.memory_allocated()` and the other names directly on
    `torch.cuda` are NPU120's. The table is `codemods/data/coverage_memory.json`.

    ## Example

    ```python
    # before
    from torch.cuda.memory import _record_memory_history
    used = torch.cuda.memory.memory_allocated(0)
    free, total = torch.cuda.memory.mem_get_info()
    # after
    from torch_npu.npu.memory import _record_memory_history
    used = torch.npu.memory.memory_allocated(0)
    free, total = torch.npu.mem_get_info()
    ```

    ## Fix safety

    Safe: same functions, same signatures (`torch.npu.memory` follows `torch.cuda.memory`). Arguments of `_record_memory_history` are NPU156's. Suppress a line with `# npu-migrate: ignore[NPU155]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU155"
    name = "cuda-memory-submodule"
    summary = "`torch.cuda.memory.<fn>` (reached through the submodule) becomes `torch.npu.memory.<fn>`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU155")


CASES = [
    Invalid(
        """\
        import os
        import torch
        from torch.cuda.memory import _record_memory_history
        used = torch.cuda.memory.memory_allocated(0)
        free, total = torch.cuda.memory.mem_get_info()
    """,
        after="""\
        import os
        import torch
        from torch_npu.npu.memory import _record_memory_history
        used = torch.npu.memory.memory_allocated(0)
        free, total = torch.npu.mem_get_info()
    """,
    ),
    Valid(
        """\
        import os
        import torch
        from torch_npu.npu.memory import _record_memory_history
        used = torch.npu.memory.memory_allocated(0)
        free, total = torch.npu.mem_get_info()
    """,
    ),
    Invalid(
        """\
    import torch
    a = torch.cuda.memory.memory_allocated(0)
    b = torch.cuda.memory.mem_get_info()
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    a = torch.npu.memory.memory_allocated(0)
    b = torch.npu.mem_get_info()
    """,
        codes=('NPU100', 'NPU155'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.cuda import memory as cm
    cm.empty_cache()
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu import memory as cm
    cm.empty_cache()
    """,
        codes=('NPU100', 'NPU155'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch.cuda.memory as cm
    cm.memory_reserved()
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu import memory as cm
    cm.memory_reserved()
    """,
        codes=('NPU100', 'NPU155'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch as th
    th.cuda.memory._dump_snapshot('s.pickle')
    """,
        after="""\
    import torch as th
    import torch_npu  # noqa: F401
    th.npu.memory._dump_snapshot('s.pickle')
    """,
        codes=('NPU100', 'NPU155'),
        with_rules=('NPU100',),
    ),
    Valid(
        """\
    import torch_npu
    torch_npu.npu.memory._record_memory_history("all", context="state", max_entries=5)
    """,
        with_rules=('NPU156', 'NPU100'),
    ),
    Valid(
        """\
    import torch
    torch.npu.memory._record_memory_history(enabled=None)
    """,
        with_rules=('NPU156', 'NPU100'),
    ),
    Valid(
        """\
    import torch
    self.memory._record_memory_history(True)
    """,
        with_rules=('NPU156', 'NPU100'),
    ),
    Valid(
        """\
    import torch
    x = torch.cuda.memory_allocated()
    """,
        with_rules=('NPU156', 'NPU100'),
    ),
]
