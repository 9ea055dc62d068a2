"""NPU201: the visible-devices rule."""

from __future__ import annotations

from codemods.framework import envmap
from codemods.framework.cases import Invalid
from codemods.framework.families.env_vars import EnvVarRule
from npu_migrate.core.diagnostics import Severity


class VisibleDevices(EnvVarRule):
    """## What it does

    `CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; a literal device list that is not strictly ascending is an error.

    ## Why

    torch_npu never reads `CUDA_VISIBLE_DEVICES`: the process-level device mask on Ascend is
    `ASCEND_RT_VISIBLE_DEVICES` (`torch_npu/npu/__init__.py`, `_parse_visible_devices`), and
    `transfer_to_npu` does not translate it. Left alone, a script that meant to use two devices sees
    every device on the host.

    The parser reads digits and commas only and stops at the first other character, and the ids must
    be **strictly ascending**: with `3,1` torch_npu reports `device_count() == 0`. So a literal value
    is checked: not ascending is an **error** (the job cannot see a device), a character other than
    digits and commas (`0, 1`, `-1`, a GPU UUID) is a **warning** saying what torch_npu will read, and a
    value computed at run time gets an **info** note. The check also runs on `ASCEND_RT_VISIBLE_DEVICES`
    itself, so a second run still reports a bad list.

    Every place that names the variable is renamed, reads included: after migration the launcher sets
    `ASCEND_RT_VISIBLE_DEVICES`, so code that reads the old name would read nothing. The rule does
    not keep both names (see `docs/rules-env-shell.md`).

    Covered places: `os.environ[...]` (read, write, `del`), `os.environ.get/setdefault/pop`,
    `os.getenv/putenv/unsetenv`, `monkeypatch.setenv/delenv`, `"NAME" in os.environ`, dict literal keys
    (`env={...}` for subprocess), `dict(os.environ, NAME=...)` / `.update(NAME=...)`, and commands given
    to `subprocess.*` / `os.system` / `os.popen` (string, f-string, argv list, or a variable holding a
    literal). A string that only mentions the name (a log message, a help text) is left alone.
    The same mapping for launch scripts (`*.sh`) is rule NPU251; both read `codemods/data/env_vars.json`.

    ## Example

    ```python
    # before
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
    subprocess.run(f"CUDA_VISIBLE_DEVICES={rank} python train.py", shell=True)
    os.environ["CUDA_VISIBLE_DEVICES"] = "3,2"   # error: not ascending

    # after
    os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
    subprocess.run(f"ASCEND_RT_VISIBLE_DEVICES={rank} python train.py", shell=True)
    os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "3,2"   # still reported: write "2,3"
    ```

    ## Fix safety

    Safe: only the name changes; values are never reordered (sorting would change which physical
    device a rank gets). Suppress a line with `# npu-migrate: ignore[NPU201]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU201"
    name = "visible-devices"
    summary = "`CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; device ids must be strictly ascending"
    severity = Severity.ERROR
    kinds = frozenset({"device_list"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
import os
import torch
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
subprocess.run(f"CUDA_VISIBLE_DEVICES={rank} python train.py", shell=True)
os.environ["CUDA_VISIBLE_DEVICES"] = "3,2"   # error: not ascending
""",
        after="""\
import os
import torch
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
subprocess.run(f"ASCEND_RT_VISIBLE_DEVICES={rank} python train.py", shell=True)
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "3,2"   # error: not ascending
""",
    ),
]
