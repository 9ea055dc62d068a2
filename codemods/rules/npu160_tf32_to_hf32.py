"""NPU160: the tf32-to-hf32 rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter

DATA = "coverage_backends.json"


class Tf32ToHf32(NameMapRule):
    """## What it does

    `torch.backends.cuda.matmul.allow_tf32` / `cudnn.allow_tf32` become `torch.npu.matmul/conv.allow_hf32`

    ## Why

    `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32` are accepted on an
    Ascend machine but nothing reads them (fact sheet §2.5). The NPU's reduced-precision fp32 mode is
    HF32: `torch.npu.matmul.allow_hf32` (default False, like the CUDA matmul flag) and
    `torch.npu.conv.allow_hf32` (default True, like the cuDNN flag). The rule rewrites reads and writes
    of the TF32 flags to the HF32 ones, keeping the file's `torch` alias (or using `torch_npu.npu`
    where `torch` is not imported). `allow_fp16_reduced_precision_reduction` and its bf16/fp16 siblings
    are reported: the NPU knob is `torch.npu.matmul.cube_math_type`.

    ## Example

    ```python
    # before
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    # after
    torch.npu.matmul.allow_hf32 = True
    torch.npu.conv.allow_hf32 = False
    ```

    ## Fix safety

    Safe: the user's precision choice is kept; HF32 is the NPU's counterpart of TF32 and the defaults match. Suppress a line with `# npu-migrate: ignore[NPU160]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: kept (info): the flag is accepted by every torch build and ignored off CUDA, so the line stays; the NPU's HF32 switches are NPU-only and are named in the message
    """

    code = "NPU160"
    portable_keeps = ('`allow_tf32` is a CUDA precision switch that every torch build accepts: on CPU it does nothing, and on Ascend torch_npu ignores it, so matmuls and convolutions stay in full fp32 there (Ascend\'s HF32 is the NPU-only `torch.npu.matmul.allow_hf32` / `torch.npu.conv.allow_hf32`: set it on a `DEVICE.type == "npu"` branch if you want it)')
    name = "tf32-to-hf32"
    summary = "`torch.backends.cuda.matmul.allow_tf32` / `cudnn.allow_tf32` become `torch.npu.matmul/conv.allow_hf32`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU160")


CASES = [
    Invalid(
        """\
    import os
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    """,
        after="""\
    import os
    import torch
    torch.npu.matmul.allow_hf32 = True
    torch.npu.conv.allow_hf32 = False
    """,
    ),
    Valid(
        """\
    import os
    import torch
    torch.npu.matmul.allow_hf32 = True
    torch.npu.conv.allow_hf32 = False
    """,
    ),
    Invalid(
        """\
    import torch as th
    if th.backends.cuda.matmul.allow_tf32:
        pass
    """,
        after="""\
    import torch as th
    import torch_npu  # noqa: F401
    if th.npu.matmul.allow_hf32:
        pass
    """,
        codes=('NPU100', 'NPU160'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    import torch.backends.cudnn as cudnn
    cudnn.allow_tf32 = True
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    import torch.backends.cudnn as cudnn
    torch.npu.conv.allow_hf32 = True
    """,
        codes=('NPU100', 'NPU160'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.backends.cuda import matmul
    matmul.allow_tf32 = True
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch.backends.cuda import matmul
    torch_npu.npu.matmul.allow_hf32 = True
    """,
        codes=('NPU100', 'NPU160'),
        with_rules=('NPU100',),
    ),
]
