"""NPU204: the alloc-conf rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid
from codemods.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class AllocConf(EnvVarRule):
    """## What it does

    `PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; keys torch_npu refuses are errors.

    ## Why

    torch_npu reads its caching-allocator settings from `PYTORCH_NPU_ALLOC_CONF`, and its parser
    (`NPUAllocatorConfig.cpp`) **stops the process at start-up** on a key it does not know. So the
    name is renamed and every key of a literal value is checked against `codemods/data/alloc_conf.json`:

    - a CUDA-only key (`backend:cudaMallocAsync` or `backend:native`, `pinned_use_cuda_host_register`,
      `pinned_num_register_threads`, ...) is an **error**: delete it;
    - `expandable_segments:True` together with `max_split_size_mb` or `garbage_collection_threshold`
      is an **error** (torch_npu refuses the combination);
    - a key accepted by torch_npu 26.x but not by the widely deployed 2.9.0-7.3.0 line (for example
      `pinned_use_background_threads`) is a **warning**;
    - `release_lock_on_cudamalloc` is translated to its NPU analogue `release_lock_on_npumalloc`.

    The checks also run on `PYTORCH_NPU_ALLOC_CONF` and `PYTORCH_ALLOC_CONF` values, so a second run
    still reports them. `roundup_power2_divisions:[256:1,512:2]` lists are parsed as one key.
    The same mapping for launch scripts (`*.sh`) is rule NPU254; both read `codemods/data/env_vars.json`.

    ## Example

    ```python
    # before
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128,release_lock_on_cudamalloc:True"
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"   # error
    # after
    os.environ["PYTORCH_NPU_ALLOC_CONF"] = "max_split_size_mb:128,release_lock_on_npumalloc:True"
    os.environ["PYTORCH_NPU_ALLOC_CONF"] = "backend:cudaMallocAsync"    # error: delete the key
    ```

    ## Fix safety

    Safe: the name and the one analogous key are renamed; refused keys are reported, never deleted silently.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU204"
    name = "alloc-conf"
    summary = "`PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; keys torch_npu refuses are errors"
    severity = Severity.ERROR
    kinds = frozenset({"alloc_conf"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
import os
import torch
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128,release_lock_on_cudamalloc:True"
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"   # error
""",
        after="""\
import os
import torch
os.environ["PYTORCH_NPU_ALLOC_CONF"] = "max_split_size_mb:128,release_lock_on_npumalloc:True"
os.environ["PYTORCH_NPU_ALLOC_CONF"] = "backend:cudaMallocAsync"   # error
""",
    ),
    Invalid(
        """\
import os
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
""",
        after="""\
import os
os.environ["PYTORCH_NPU_ALLOC_CONF"] = "expandable_segments:True"
""",
    ),
    Invalid(
        """\
import os
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128,release_lock_on_cudamalloc:True"
""",
        after="""\
import os
os.environ["PYTORCH_NPU_ALLOC_CONF"] = "max_split_size_mb:128,release_lock_on_npumalloc:True"
""",
        lines=(2,),
    ),
]
