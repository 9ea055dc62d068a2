"""NPU304: the apex-fused-layers rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from codemods.api.cases import Invalid, Valid
from codemods.families.routes import ConstructorRoute, ConstructorRouteRule, constructor_routes
from codemods.families.third_party import library_prefilter

class ApexFusedLayers(ConstructorRouteRule):
    """## What it does

    `apex.normalization.FusedLayerNorm(...)` becomes `torch.nn.LayerNorm(...)` and
    `FusedRMSNorm(...)` becomes `torch.nn.RMSNorm(..., eps=1e-5)` (apex's default spelled out:
    torch's is the dtype's machine epsilon), the same arguments by name; `memory_efficient`
    (what the backward keeps) is dropped. An import of them whose every use was rewritten goes.
    The other fused layers (`MixedFusedLayerNorm`, apex.contrib, apex.mlp, apex.transformer) and
    a class used as a base are reported with their route.

    ## Why

    apex's fused layers are CUDA kernels; `torch.nn.LayerNorm` and `torch.nn.RMSNorm` compute the same normalization (the same formula, eps inside the square root, weight and bias under the same names, so checkpoints load) and run on NPU, where torch_npu also has the fused `torch_npu.npu_rms_norm` (the opt-in tune rule NPU610 uses it).

    ## Example

    ```python
    # before
    from apex.normalization import FusedLayerNorm, FusedRMSNorm       # NPU304
    norm = FusedLayerNorm(1024, eps=1e-6)
    rms = FusedRMSNorm(1024)

    # after

    norm = torch.nn.LayerNorm(1024, eps=1e-6)
    rms = torch.nn.RMSNorm(1024, eps=1e-5)
    ```

    ## Fix safety

    Unsafe: the same formula in another kernel, so results agree to rounding but not bit for
    bit (apex's kernel accumulates in its own order; for half inputs both compute in float32).
    `torch.nn.RMSNorm` needs torch 2.4: with an older `target-version` the call stays and is
    reported.

    ## Targets

    - **npu**: rewrites to the torch.nn layer (unsafe fix)
    - **portable**: the same rewrite (torch.nn runs on every device)
    """

    code = "NPU304"
    supported_targets = frozenset({"npu", "portable"})
    name = "apex-fused-layers"
    summary = ("apex FusedLayerNorm/FusedRMSNorm become torch.nn.LayerNorm/RMSNorm; other apex fused layers "
               "(contrib, transformer) are reported with their route")
    prefilter = library_prefilter("NPU304")
    library = "apex"
    modules = ("apex.normalization",)
    routes: ClassVar[Mapping[str, ConstructorRoute]] = constructor_routes("apex.normalization")  # codemods/data/routes.json


CASES = [
    Invalid(  # the import goes with the last call
        """\
        import torch
        from apex.normalization import FusedLayerNorm
        norm = FusedLayerNorm(1024)
        """,
        after="""\
        import torch

        norm = torch.nn.LayerNorm(1024)
        """,
    ),
    Invalid(  # apex's eps spelled out; memory_efficient dropped; the other name keeps the import
        """\
        import torch
        from apex.normalization import FusedRMSNorm, MixedFusedLayerNorm
        rms = FusedRMSNorm(hidden, memory_efficient=True)
        mixed = MixedFusedLayerNorm(hidden)
        """,
        after="""\
        import torch
        from apex.normalization import MixedFusedLayerNorm
        rms = torch.nn.RMSNorm(hidden, eps=1e-5)
        mixed = MixedFusedLayerNorm(hidden)
        """,
    ),
    Invalid(  # torch.nn.RMSNorm is newer than target-version: kept, error with the reason
        """\
        import apex.normalization
        rms = apex.normalization.FusedRMSNorm(1024)
        """,
        options=(("target_version", "2.1"),),
    ),
    Invalid(  # a base class is not a call: the import is reported, nothing rewritten
        """\
        from apex.normalization import FusedLayerNorm
        class Norm(FusedLayerNorm):
            pass
        """,
    ),
    Valid(
        """\
        import torch
        norm = torch.nn.LayerNorm(1024)
        print("FusedLayerNorm is replaced by torch.nn.LayerNorm")
        """,
    ),
]
