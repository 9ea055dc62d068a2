"""NPU103-NPU105: CUDA device strings become NPU device strings, in device positions only.

A string is rewritten only where the code proves it names a device: an argument the device
table calls a device (`codemods/data/device_positions*.json`), a branch of
`... if torch.cuda.is_available() else ...`, a comparison against a device-valued expression,
or the default and choices of an argparse `--device` option. Anywhere else (log messages,
paths such as "cuda_model.pt", docstrings, flag names such as `--no-cuda`) it stays.
Only the exact forms `cuda` and `cuda:N` are rewritten (also as f-strings, `%` and
`.format` templates); a string in a device position that mentions CUDA in any other way is
reported instead.
"""

from __future__ import annotations

import libcst as cst

from codemods.analyses.devices import (
    collection_mentions_cuda,
    device_collection,
    device_expr,
    device_positions,
    mentions_cuda,
)
from codemods.analyses.portable import generic_device_collection, generic_device_value
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.model.cstnodes import code_of
from npu_migrate.core.diagnostics import Severity

PREFILTER = r"""['"]cuda\b"""


class DeviceRule(Rule):
    fix = Fix.SAFE
    prefilter = PREFILTER
    needs_torch_npu = True
    severity = Severity.WARNING

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.table = device_positions()

    def swap(self, original: cst.BaseExpression, updated: cst.BaseExpression, where: str,
             collection: bool = False) -> cst.BaseExpression:
        """Rewrite one device position; record the edit, or report a CUDA string we cannot
        prove to be a plain device string."""
        if self.target == "portable":
            new = generic_device_collection(self.context, updated) if collection else generic_device_value(
                self.context, updated)
        else:
            new = device_collection(updated) if collection else device_expr(updated)
        if new is None:
            if self._doubtful(updated, collection) or self.target == "portable":
                self.report(original, f"`{code_of(original)}` in {where} mentions CUDA but is no "
                                      "plain `cuda`/`cuda:N` device string: port it by hand")
            return updated
        self.fixed(original, f"`{code_of(updated)}` → `{code_of(new)}` ({where})")
        return new

    @staticmethod
    def _doubtful(node: cst.BaseExpression, collection: bool) -> bool:
        return collection_mentions_cuda(node) if collection else mentions_cuda(node)

