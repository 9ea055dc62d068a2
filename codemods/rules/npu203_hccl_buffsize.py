"""NPU203: the hccl-buffsize rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid
from codemods.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class HcclBuffsize(EnvVarRule):
    """## What it does

    `NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB): a literal value is converted; a computed value or a read is reported.

    ## Why

    NCCL sizes its communication buffer in **bytes** (`NCCL_BUFFSIZE=4194304`, 4 MiB); HCCL's
    `HCCL_BUFFSIZE` is in **MB** (default 200; `OptionsManager.cpp`). Copying the value would ask for
    4 TB. A literal (decimal or `0x` hex, as NCCL parses it) is converted to MB, rounded up, with an
    info note when it is not a whole number of MB. A value computed at run time, one taken from a
    constant, and a read of `NCCL_BUFFSIZE` are reported and **not** renamed, since the unit change
    must be made where the number is produced or used. `P2P_HCCL_BUFFSIZE` (MB) sizes the buffers of
    isend/irecv separately.
    The same mapping for launch scripts (`*.sh`) is rule NPU253; both read `codemods/data/env_vars.json`.

    ## Example

    ```python
    # before
    os.environ["NCCL_BUFFSIZE"] = "8388608"
    os.environ["NCCL_BUFFSIZE"] = str(8 << 20)        # reported: computed
    # after
    os.environ["HCCL_BUFFSIZE"] = "8"
    os.environ["NCCL_BUFFSIZE"] = str(8 << 20)        # set HCCL_BUFFSIZE in MB instead
    ```

    ## Fix safety

    Safe for literals (the size is kept, rounded up to whole MB); everything else is left to the user.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU203"
    name = "hccl-buffsize"
    summary = "`NCCL_BUFFSIZE` (bytes) becomes `HCCL_BUFFSIZE` (MB): literal values converted, computed ones flagged"
    severity = Severity.WARNING
    kinds = frozenset({"bytes_to_mb"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
import os
import torch
os.environ["NCCL_BUFFSIZE"] = "8388608"
os.environ["NCCL_BUFFSIZE"] = str(8 << 20)        # reported: computed
""",
        after="""\
import os
import torch
os.environ["HCCL_BUFFSIZE"] = "8"
os.environ["NCCL_BUFFSIZE"] = str(8 << 20)        # reported: computed
""",
    ),
    Invalid(
        """\
import os
os.environ["NCCL_BUFFSIZE"] = "8388608"
""",
        after="""\
import os
os.environ["HCCL_BUFFSIZE"] = "8"
""",
    ),
    Invalid(
        """\
import os
os.environ.setdefault("NCCL_BUFFSIZE", "0x400000")
""",
        after="""\
import os
os.environ.setdefault("HCCL_BUFFSIZE", "4")
""",
    ),
]
