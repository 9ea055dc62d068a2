"""NPU161: the cudnn-flags rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"


class CudnnFlags(NameMapRule):
    """## What it does

    `cudnn.benchmark` / `cudnn.deterministic` / `cudnn.enabled` have no effect on NPU

    ## Why

    `torch.backends.cudnn.benchmark`, `deterministic`, `enabled`, `benchmark_limit` and `flags(...)`
    are accepted on an Ascend machine but no NPU code reads them (fact sheet §2.5). `benchmark` is
    harmless (info). `deterministic = True` is a **warning**: the run is no longer made reproducible.
    For determinism on NPU use `torch.use_deterministic_algorithms(True)` (plus
    `HCCL_DETERMINISTIC=true` for collectives) or `torch_npu.npu.set_deterministic_level`. Nothing is
    rewritten: adding `use_deterministic_algorithms(True)` makes non-deterministic ops raise, which is
    a decision for the user.

    ## Example

    ```python
    torch.backends.cudnn.benchmark = True       # info: no effect on NPU
    torch.backends.cudnn.deterministic = True   # warning: use torch.use_deterministic_algorithms(True)
    ```

    ## Fix safety

    Diagnostic only. Suppress a line with `# npu-migrate: ignore[NPU161]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: not yet
    """

    code = "NPU161"
    name = "cudnn-flags"
    summary = "`cudnn.benchmark` / `cudnn.deterministic` / `cudnn.enabled` have no effect on NPU"
    fix = Fix.NONE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU161")


CASES = [
    Invalid(
        """\
import os
import torch
torch.backends.cudnn.benchmark = True       # info: no effect on NPU
torch.backends.cudnn.deterministic = True   # warning: use torch.use_deterministic_algorithms(True)
""",
    ),
]
