"""NPU150: the typed-cuda-tensor rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter

DATA = "coverage_tensors.json"


class TypedTensor(NameMapRule):
    """## What it does

    `torch.cuda.FloatTensor` and the other typed CUDA classes become `torch.npu.*` (float64 flagged)

    ## Why

    The legacy typed classes `torch.cuda.FloatTensor`, `HalfTensor`, `LongTensor`, ... do not exist
    for the NPU under those names; torch_npu exports the same ten classes as `torch.npu.*`
    (`torch_npu.npu.__all__`, fact sheet §2.1). `transfer_to_npu` aliases them at run time, except
    that it turns `torch.cuda.DoubleTensor` into `torch.npu.FloatTensor`: code asking for float64
    silently computes in float32.

    npu-migrate rewrites each class to its `torch.npu` twin, float64 included, and warns at
    `DoubleTensor`: many Ascend kernels have no float64 version, so the port may need float32 on
    purpose, but that is the user's call, not a silent change. Uses spelled from `torch` are rewritten
    in place (`th.cuda.FloatTensor` keeps the `th` alias); `from torch.cuda import FloatTensor` is
    repointed at `torch_npu.npu` so the uses stay as they are. The typed *Storage* classes are NPU120's
    (`codemods/data/torch_cuda.json`); the type strings are NPU151's.

    ## Example

    ```python
    # before
    x = torch.cuda.FloatTensor(8)
    ok = isinstance(y, torch.cuda.LongTensor)
    z = torch.cuda.DoubleTensor(8)          # warning: float64 on NPU
    # after
    x = torch.npu.FloatTensor(8)
    ok = isinstance(y, torch.npu.LongTensor)
    z = torch.npu.DoubleTensor(8)
    ```

    ## Fix safety

    Safe: the NPU class has the same dtype and constructor. The float64 warning asks for a decision; nothing is changed behind the user's back. Suppress a line with `# npu-migrate: ignore[NPU150]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU150"
    name = "typed-cuda-tensor"
    summary = "`torch.cuda.FloatTensor` and the other typed CUDA classes become `torch.npu.*` (float64 flagged)"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU150")


CASES = [
    Invalid(
        """\
    import os
    import torch
    x = torch.cuda.FloatTensor(8)
    ok = isinstance(y, torch.cuda.LongTensor)
    z = torch.cuda.DoubleTensor(8)          # warning: float64 on NPU
    """,
        after="""\
    import os
    import torch
    x = torch.npu.FloatTensor(8)
    ok = isinstance(y, torch.npu.LongTensor)
    z = torch.npu.DoubleTensor(8)          # warning: float64 on NPU
    """,
    ),
    Valid(
        """\
    import os
    import torch
    x = torch.npu.FloatTensor(8)
    ok = isinstance(y, torch.npu.LongTensor)
    z = torch.npu.DoubleTensor(8)          # warning: float64 on NPU
    """,
    ),
    Invalid(
        """\
    import torch as th
    x = th.cuda.FloatTensor(3)
    """,
        after="""\
    import torch as th
    import torch_npu  # noqa: F401
    x = th.npu.FloatTensor(3)
    """,
        codes=('NPU100', 'NPU150'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    ok = isinstance(x, (torch.cuda.LongTensor, torch.cuda.IntTensor))
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    ok = isinstance(x, (torch.npu.LongTensor, torch.npu.IntTensor))
    """,
        codes=('NPU100', 'NPU150'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.cuda import HalfTensor as HT
    y = HT(2)
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu import HalfTensor as HT
    y = HT(2)
    """,
        codes=('NPU100', 'NPU150'),
        with_rules=('NPU100',),
    ),
    Valid(
        """\
    import torch
    x = t.type(torch.float16)
    """,
        with_rules=('NPU151', 'NPU100'),
    ),
    Valid(
        """\
    import torch
    log('torch.cuda.FloatTensor is old')
    """,
        with_rules=('NPU151', 'NPU100'),
    ),
    Valid(
        """\
    import torch
    if name == 'torch.cuda.FloatTensor':
        pass
    """,
        with_rules=('NPU151', 'NPU100'),
    ),
    Valid(
        """\
    import torch
    x = self.FloatTensor(3)
    """,
        with_rules=('NPU151', 'NPU100'),
    ),
    Valid(
        """\
    x = FloatTensor(3)
    """,
        with_rules=('NPU151', 'NPU100'),
    ),
]
