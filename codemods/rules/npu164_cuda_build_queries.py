"""NPU164: the cuda-build-queries rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


class CudaBuildQueries(NameMapRule):
    """## What it does

    Queries about cuDNN/cuBLAS (`cudnn.is_available()`, `cudnn.version()`, ...) answer 'no' on NPU

    ## Why

    Questions about the CUDA build answer "no" on an Ascend machine: `torch.backends.cudnn.is_available()`
    is False, `cudnn.version()` is None, `torch.backends.cuda.is_built()` is False on a CPU wheel, and
    `preferred_linalg_library`, `preferred_blas_library` and the cuBLAS workspace sizes have no
    counterpart. Code gated on them silently takes its non-CUDA path, which may be what the user wants
    or not. The rule reports each (info) so the gate can be checked or replaced by
    `torch.npu.is_available()`.

    ## Example

    ```python
    if torch.backends.cudnn.is_available() and torch.backends.cudnn.version() >= 8000:   # info x2
        use_fast_path()
    ```

    ## Fix safety

    Diagnostic only. Suppress a line with `# npu-migrate: ignore[NPU164]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU164"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-build-queries"
    summary = "Queries about cuDNN/cuBLAS (`cudnn.is_available()`, `cudnn.version()`, ...) answer 'no' on NPU"
    fix = Fix.NONE
    severity = Severity.INFO
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU164")


CASES = [
    Invalid(
        """\
import os
import torch
if torch.backends.cudnn.is_available() and torch.backends.cudnn.version() >= 8000:   # info x2
    use_fast_path()
""",
    ),
]
