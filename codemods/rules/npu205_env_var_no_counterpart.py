"""NPU205: the env-var-no-counterpart rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.env_vars import EnvVarRule


class EnvNoCounterpart(EnvVarRule):
    """## What it does

    CUDA/NCCL variables with no verified NPU counterpart are reported (diagnostic only).

    ## Why

    Some variables have no effect on Ascend and no counterpart that takes the same value:

    - `NCCL_ALGO` (CANN's `HCCL_ALGO` uses another value format), `NCCL_IB_TC` / `NCCL_IB_SL` (CANN's
      `HCCL_RDMA_TC` / `HCCL_RDMA_SL`; check the accepted values): **warning**;
    - other `TORCH_NCCL_*` names (no `TORCH_HCCL_` counterpart in ProcessGroupHCCL): **warning**;
    - `NVIDIA_TF32_OVERRIDE`, `TORCH_ALLOW_TF32_CUBLAS_OVERRIDE` (TF32 in NVIDIA's libraries; Ascend's
      HF32 is switched in code, `torch.npu.matmul.allow_hf32` / `torch.npu.conv.allow_hf32`): **warning**;
    - `NCCL_DEBUG`, `NCCL_SOCKET_IFNAME` and every other `NCCL_*`, `NVIDIA_VISIBLE_DEVICES` (Ascend's
      container-level variable is `ASCEND_VISIBLE_DEVICES`), `CUBLAS_WORKSPACE_CONFIG` (use
      `torch.use_deterministic_algorithms(True)` and `HCCL_DETERMINISTIC`), `TORCH_CUDA_ARCH_LIST`,
      `CUDA_HOME`/`CUDA_PATH` (the CANN toolkit is at `ASCEND_HOME_PATH`) and the CUDA runtime settings
      `CUDA_DEVICE_ORDER`, `CUDA_DEVICE_MAX_CONNECTIONS`, `CUDA_MODULE_LOADING`, `CUDA_CACHE_*`,
      `CUDA_MPS_*`, `TORCH_USE_CUDA_DSA`: **info**. Only listed `CUDA_*` names count: a script's own
      variable such as `CUDA_FLAG` is not a CUDA setting.

    Nothing is rewritten: the CANN-level variables are documented outside torch_npu and were not
    verified, so the report names the route and leaves the decision to you.
    The same mapping for launch scripts (`*.sh`) is rule NPU255; both read `codemods/data/env_vars.json`.

    ## Example

    ```python
    os.environ["NCCL_DEBUG"] = "INFO"       # NPU205 info: no effect on NPU
    os.environ["NCCL_ALGO"] = "Ring"        # NPU205 warning: HCCL_ALGO has another format
    ```

    ## Fix safety

    No fix: diagnostic only.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU205"
    supported_targets = frozenset({"npu", "portable"})
    name = "env-var-no-counterpart"
    summary = "CUDA/NCCL variables with no verified NPU counterpart are reported (NCCL_*, CUDA_*, ...)"
    fix = Fix.NONE
    kinds = frozenset({"flag"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
import os
import torch
os.environ["NCCL_DEBUG"] = "INFO"
os.environ["NCCL_ALGO"] = "Ring"
""",
    ),
    Invalid(  # litgpt's tests/conftest.py: TF32 off for exact float32 results
        """\
import torch
def test_exact(monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
""",
    ),
]
