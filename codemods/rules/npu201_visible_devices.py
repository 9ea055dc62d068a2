"""NPU201: the visible-devices rule."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from codemods.analyses import envmap
from codemods.analyses.portable import ASCEND_VISIBLE, CUDA_VISIBLE, TWIN_MESSAGE, shell_visible_twins
from codemods.api.cases import Invalid, Valid
from codemods.families.env_vars import EnvVarRule, fstring_template, subscript_key
from codemods.model.cstnodes import code_of, dotted_name, verbatim_string
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
    - **portable**: `os.environ["CUDA_VISIBLE_DEVICES"] = v` stays and is followed by `os.environ["ASCEND_RT_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]`; commands in strings get the variable beside the CUDA one as in NPU251; reads stay (info: portable launches set both); other writes (dict keys, `setdefault`, argv lists) are reported. A file that already names `ASCEND_RT_VISIBLE_DEVICES` gets no second twin
    """

    code = "NPU201"
    name = "visible-devices"
    summary = "`CUDA_VISIBLE_DEVICES` becomes `ASCEND_RT_VISIBLE_DEVICES`; device ids must be strictly ascending"
    severity = Severity.ERROR
    kinds = frozenset({"device_list"})
    prefilter = envmap.names_pattern(kinds)
    supported_targets = frozenset({"npu", "portable"})

    # -- portable: set ASCEND_RT_VISIBLE_DEVICES beside CUDA_VISIBLE_DEVICES, keep the CUDA one --
    def _twinned(self) -> bool:
        """A file that names the Ascend variable already has its twins (a second run)."""
        return ASCEND_VISIBLE in self.context.source

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        key = self._environ_write(node) if self.target == "portable" else None
        if key is not None and not self._twinned():
            self.tree.nodes("twinned").add(key)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> Any:
        key = self._environ_write(original_node)
        if key is None or key not in self.tree.nodes("twinned"):
            return updated_node
        assign = original_node.body[0]
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Subscript)
        environ = code_of(assign.targets[0].target.value)
        twin = cst.parse_statement(f'{environ}["{ASCEND_VISIBLE}"] = {environ}["{CUDA_VISIBLE}"]\n')
        self.fixed(key, TWIN_MESSAGE)
        return cst.FlattenSentinel([updated_node, twin])

    @staticmethod
    def _environ_write(line: cst.SimpleStatementLine) -> cst.SimpleString | None:
        """The key of `os.environ["CUDA_VISIBLE_DEVICES"] = ...` when that is the whole line."""
        if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign) or len(line.body[0].targets) != 1:
            return None
        target = line.body[0].targets[0].target
        if not (isinstance(target, cst.Subscript) and dotted_name(target.value) in ("os.environ", "environ")):
            return None
        key = subscript_key(target)
        return key if key is not None and verbatim_string(key) == CUDA_VISIBLE else None

    def _occurrence(self, original_key: cst.CSTNode, key: cst.SimpleString, value: cst.BaseExpression | None,
                    write: bool) -> tuple[cst.SimpleString, cst.SimpleString | None]:
        if self.target != "portable":
            return super()._occurrence(original_key, key, value, write)
        if verbatim_string(key) != CUDA_VISIBLE or original_key in self.tree.nodes("twinned"):
            return key, None
        if not write or self._twinned():
            self.report(original_key, f"`{CUDA_VISIBLE}` kept under --target portable: portable launches set "
                                      f"`{ASCEND_VISIBLE}` beside it (NPU251), so it reads the same on CUDA and Ascend hosts",
                        severity=Severity.INFO)
        else:
            self.report(original_key, f"`{CUDA_VISIBLE}` set here: under --target portable set `{ASCEND_VISIBLE}` "
                                      "to the same value beside it by hand", severity=Severity.WARNING)
        return key, None

    def _shell(self, original: cst.CSTNode, text: str) -> str:
        if self.target != "portable":
            return super()._shell(original, text)
        changes = shell_visible_twins(text)
        for change in changes:
            if change.replacement is None:
                self.report(original, change.message, severity=change.severity)
        edits = [c for c in changes if c.replacement is not None]
        if edits:
            self.fixed(original, TWIN_MESSAGE)
        return envmap.apply_changes(text, edits)

    def _fstring(self, original: cst.CSTNode, node: cst.FormattedString) -> cst.FormattedString:
        """As for npu, but the twin repeats the value's `{expressions}`."""
        if self.target != "portable":
            return super()._fstring(original, node)
        joined = fstring_template(node)
        if joined is None:
            return node
        new = self._shell(original, joined)
        if new == joined or node.end in new:
            return node
        parts: list[cst.BaseFormattedStringContent] = []
        for piece in re.split(r"(\$\{__npu_migrate_\d+__\})", new):
            found = re.fullmatch(r"\$\{__npu_migrate_(\d+)__\}", piece)
            if found:
                parts.append(node.parts[int(found.group(1))])
            elif piece:
                parts.append(cst.FormattedStringText(piece))
        return node.with_changes(parts=parts)

    def _argv(self, original: cst.CSTNode, node: cst.List | cst.Tuple) -> cst.BaseExpression:
        if self.target != "portable":
            return super()._argv(original, node)
        if any(CUDA_VISIBLE in (verbatim_string(e.value) or "") for e in node.elements):
            self.report(original, f"`{CUDA_VISIBLE}` in an argument list: under --target portable add "
                                  f"`{ASCEND_VISIBLE}=<same ids>` beside it by hand", severity=Severity.WARNING)
        return node


CASES = [
    Invalid(
        """\
import os
import subprocess
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
subprocess.run(f"CUDA_VISIBLE_DEVICES={rank} python train.py", shell=True)
ids = os.environ.get("CUDA_VISIBLE_DEVICES", "")
""",
        after="""\
import os
import subprocess
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
subprocess.run(f"ASCEND_RT_VISIBLE_DEVICES={rank} CUDA_VISIBLE_DEVICES={rank} python train.py", shell=True)
ids = os.environ.get("CUDA_VISIBLE_DEVICES", "")
""",
        options=(("target", "portable"),),
    ),
    Invalid(  # the second run: the twins are there, nothing changes (the CUDA name is noted)
        """\
import os
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
""",
        options=(("target", "portable"),),
    ),
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
    Invalid(
        """\
import os
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
""",
        after="""\
import os
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
""",
    ),
    Invalid(
        """\
import os
os.environ['CUDA_VISIBLE_DEVICES'] = '2'
""",
        after="""\
import os
os.environ['ASCEND_RT_VISIBLE_DEVICES'] = '2'
""",
    ),
    Invalid(
        """\
import os
g = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
""",
        after="""\
import os
g = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "0")
""",
    ),
    Invalid(
        """\
import os as o
g = o.getenv("CUDA_VISIBLE_DEVICES")
""",
        after="""\
import os as o
g = o.getenv("ASCEND_RT_VISIBLE_DEVICES")
""",
    ),
    Invalid(
        """\
import os
if "CUDA_VISIBLE_DEVICES" not in os.environ:
    pass
""",
        after="""\
import os
if "ASCEND_RT_VISIBLE_DEVICES" not in os.environ:
    pass
""",
    ),
    Invalid(
        """\
import os, subprocess
subprocess.run(["python", "t.py"], env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"})
""",
        after="""\
import os, subprocess
subprocess.run(["python", "t.py"], env={**os.environ, "ASCEND_RT_VISIBLE_DEVICES": "1"})
""",
    ),
    Invalid(
        """\
import os
env = os.environ.copy()
env["CUDA_VISIBLE_DEVICES"] = "0"
""",
        after="""\
import os
env = os.environ.copy()
env["ASCEND_RT_VISIBLE_DEVICES"] = "0"
""",
    ),
    Invalid(
        """\
import subprocess
subprocess.run(f"CUDA_VISIBLE_DEVICES={i} torchrun t.py --dist-backend=nccl", shell=True)
""",
        after="""\
import subprocess
subprocess.run(f"ASCEND_RT_VISIBLE_DEVICES={i} torchrun t.py --dist-backend=hccl", shell=True)
""",
        codes=('NPU201', 'NPU206'),
        lines=(2,),
        with_rules=('NPU206',),
    ),
    Invalid(
        """\
import subprocess
subprocess.run(args=("CUDA_VISIBLE_DEVICES=0 " + cmd), shell=True)
""",
        after="""\
import subprocess
subprocess.run(args=("ASCEND_RT_VISIBLE_DEVICES=0 " + cmd), shell=True)
""",
    ),
    Valid(
        """\
print("set CUDA_VISIBLE_DEVICES=0 before running")
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
import os
log.info("CUDA_VISIBLE_DEVICES")
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
HELP = "CUDA_VISIBLE_DEVICES=0 python train.py"
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
import os
os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
import os
os.environ["HCCL_BUFFSIZE"] = "200"
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
import os
os.environ["MY_CUDA_VISIBLE_DEVICES"] = "3,1"
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
import os
os.environ[b"CUDA_VISIBLE_DEVICES"] = b"0"
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
    Valid(
        """\
import subprocess
subprocess.run(["python", "t.py", "--backend", "gloo"])
""",
        with_rules=('NPU202', 'NPU203', 'NPU204', 'NPU205', 'NPU206', 'NPU207'),
    ),
]
