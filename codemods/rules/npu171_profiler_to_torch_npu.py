"""NPU171: the profiler-to-torch-npu rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, name_prefilter
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_profiler.json"


_PROFILE = frozenset({"torch.profiler.profile", "torch.profiler.profiler.profile"})


# keywords of torch.profiler.profile that torch_npu.profiler.profile does not take
_NPU_PROFILE_LACKS = ("acc_events", "post_processing_timeout_s")


class ProfilerToTorchNpu(NameMapRule):
    """## What it does

    `torch.profiler.profile` and friends become `torch_npu.profiler.*`; `ProfilerActivity.CUDA` → `.NPU`

    ## Why

    `transfer_to_npu` replaces `torch.profiler.profile`, `schedule`, `tensorboard_trace_handler` and
    `ProfilerAction` with the `torch_npu.profiler` versions and maps `ProfilerActivity.CUDA` to
    `ProfilerActivity.NPU` (fact sheet §1.4). The rule does the same statically, always and for all of
    these names together, since torch_npu's `profile` expects torch_npu's `ProfilerActivity` enum:
    uses spelled from `torch` are rewritten, and `from torch.profiler import ...` is repointed (names
    torch_npu does not provide, such as `record_function`, stay in a `torch.profiler` import of their
    own). Reported: other `ProfilerActivity` members (the NPU enum has CPU and NPU only), a CUDA
    `_ExperimentalConfig` (torch_npu drops it; use `torch_npu.profiler._ExperimentalConfig`), and
    `acc_events=` / `post_processing_timeout_s=`, which torch_npu's `profile` does not take.

    ## Example

    ```python
    # before
    from torch.profiler import profile, record_function, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("forward"):
            ...
    # after
    from torch.profiler import record_function
    from torch_npu.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
        with record_function("forward"):
            ...
    ```

    ## Fix safety

    Safe: the torch_npu profiler takes the same arguments (except the reported ones) and writes traces the same viewers read. Suppress a line with `# npu-migrate: ignore[NPU171]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: kept (info): `torch.profiler` with `ProfilerActivity.CUDA` runs on every build (CPU traces off CUDA); Ascend device traces need `torch_npu.profiler`, which is NPU-only
    """

    code = "NPU171"
    portable_keeps = ('`torch.profiler` takes `ProfilerActivity.CUDA` on every build and records CPU activity where there is no CUDA; device traces on Ascend need `torch_npu.profiler`, which is NPU-only code, so it is not written')
    name = "profiler-to-torch-npu"
    summary = "`torch.profiler.profile` and friends become `torch_npu.profiler.*`; `ProfilerActivity.CUDA` → `.NPU`"
    fix = Fix.SAFE
    needs_torch_npu = True
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU171")

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> Any:
        if self.resolve(original_node.func) in _PROFILE:
            for arg in original_node.args:
                if arg.keyword is not None and arg.keyword.value in _NPU_PROFILE_LACKS:
                    self.report(arg, f"torch_npu.profiler.profile has no `{arg.keyword.value}=`: remove it",
                                severity=Severity.WARNING)
        return updated_node


CASES = [
    Invalid(  # LLaMA-Factory's callbacks.py: code written for Ascend spells the NPU member on torch's enum
        """\
        import torch
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.NPU]
        profiler = torch.profiler.profile(activities=activities)
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        activities = [torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU]
        profiler = torch_npu.profiler.profile(activities=activities)
        """,
        codes=("NPU100", "NPU171"),
    ),
    Invalid(
        """\
        import os
        import torch
        from torch.profiler import profile, record_function, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            with record_function("forward"):
                ...
    """,
        after="""\
        import os
        import torch
        from torch.profiler import record_function
        from torch_npu.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
            with record_function("forward"):
                ...
    """,
    ),
    Valid(
        """\
        import os
        import torch
        from torch.profiler import record_function
        from torch_npu.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
            with record_function("forward"):
                ...
    """,
    ),
    Invalid(
        """\
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function('fwd'):
            pass
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    from torch.profiler import record_function
    from torch_npu.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
        with record_function('fwd'):
            pass
    """,
        codes=('NPU100', 'NPU171'),
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    import torch
    p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=torch.profiler.tensorboard_trace_handler('./log'))
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    p = torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler('./log'))
    """,
        codes=('NPU100', 'NPU171'),
        with_rules=('NPU100',),
    ),
]
