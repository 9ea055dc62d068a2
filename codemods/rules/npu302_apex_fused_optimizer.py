"""NPU302: the apex-fused-optimizer rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from codemods.api.cases import Invalid, Valid
from codemods.families.routes import ConstructorRoute, ConstructorRouteRule, constructor_routes
from codemods.families.third_party import library_prefilter


class ApexFusedOptimizer(ConstructorRouteRule):
    """## What it does

    `apex.optimizers.FusedAdam(...)` becomes `torch.optim.AdamW(...)` (its default
    `adam_w_mode=True`; `torch.optim.Adam` for `adam_w_mode=False`) with apex's
    `weight_decay=0.0` spelled out where the call leaves it out (AdamW's default is 1e-2), and
    `FusedSGD(...)` becomes `torch.optim.SGD(...)`, the other arguments by name. An import of them
    whose every use was rewritten goes. A call with an argument torch.optim has no form for
    (`bias_correction=False`, `amsgrad`, `set_grad_none=False`, `capturable`, `master_weights`,
    `wd_after_momentum`) stays, reported (error) with the reason; FusedLAMB and FusedNovoGrad
    (no torch.optim counterpart) are reported.

    ## Why

    apex's fused optimizers are CUDA kernels; they implement torch.optim's update rules (FusedAdam in AdamW mode decouples the weight decay as `torch.optim.AdamW` does, with the same `eps` outside the square root; FusedSGD is SGD with momentum, dampening and Nesterov) and the torch.optim classes run on NPU. The NPU's own fused optimizers (`torch_npu.optim.NpuFusedAdamW`, ...) are one step further: the opt-in tune rule NPU600 rewrites torch.optim to them.

    ## Example

    ```python
    # before
    from apex.optimizers import FusedAdam                              # NPU302
    opt = FusedAdam(model.parameters(), lr=1e-3, weight_decay=0.01)

    # after

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ```

    ## Fix safety

    Unsafe: the same update in another kernel (results agree to rounding, not bit for bit). The
    optimizer's state dict keys differ from apex's, so an apex checkpoint's optimizer state does
    not load into the new optimizer. FusedSGD's default `set_grad_none=False` zeroes gradients in
    `zero_grad()` where torch sets them to None: a parameter that gets no gradient is then
    skipped by torch's step instead of moved by its momentum.

    ## Targets

    - **npu**: rewrites to torch.optim (unsafe fix)
    - **portable**: the same rewrite (torch.optim runs on every device)
    """

    code = "NPU302"
    supported_targets = frozenset({"npu", "portable"})
    name = "apex-fused-optimizer"
    summary = "apex FusedAdam/FusedSGD become torch.optim.AdamW/Adam/SGD; FusedLAMB/FusedNovoGrad are reported"
    prefilter = library_prefilter("NPU302")
    library = "apex"
    modules = ("apex.optimizers",)
    routes: ClassVar[Mapping[str, ConstructorRoute]] = constructor_routes("apex.optimizers")  # codemods/data/routes.json


CASES = [
    Invalid(
        """\
        import torch
        from apex.optimizers import FusedAdam
        opt = FusedAdam(model.parameters(), lr=1e-3, weight_decay=0.01)
        """,
        after="""\
        import torch

        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        """,
    ),
    Invalid(  # L2 mode is Adam; apex's weight_decay default spelled out; positional arguments by name; `import apex` goes
        """\
        import torch
        import apex
        opt = apex.optimizers.FusedAdam(params, 3e-4, adam_w_mode=False, betas=(0.9, 0.95))
        sgd = apex.optimizers.FusedSGD(params, 0.1, 0.9, nesterov=True)
        """,
        after="""\
        import torch

        opt = torch.optim.Adam(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0)
        sgd = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
        """,
    ),
    Invalid(  # no bias correction in torch.optim: kept, error with the reason
        """\
        from apex.optimizers import FusedAdam
        opt = FusedAdam(params, lr=1e-3, bias_correction=False)
        """,
    ),
    Invalid(  # FusedLAMB has no torch.optim counterpart: reported at the import
        """\
        from apex.optimizers import FusedLAMB
        opt = FusedLAMB(params, lr=1e-3)
        """,
    ),
    Valid(
        """\
        import torch
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        optimizer_name = "FusedAdam"
        """,
    ),
]
