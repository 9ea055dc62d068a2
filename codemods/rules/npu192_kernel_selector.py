"""NPU192: the kernel-selector rule."""

from __future__ import annotations

from typing import Any, ClassVar

from codemods.analyses.selectors import kernel_selectors
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from npu_migrate.core.diagnostics import Severity


class KernelSelector(Rule):
    """## What it does

    A `"cuda"` that names an implementation, not a device (`impl='cuda'` next to `impl='ref'`), stays as written and is noted once per line

    ## Why

    StyleGAN's ops (and many kernel libraries) take `impl='cuda'` and test `if impl == 'cuda' and x.device.type == 'cuda' and _init():` in front of a CUDA plugin, with `assert impl in ['ref', 'cuda']`. There `'cuda'` picks the CUDA implementation; `"npu"` would name one that does not exist. What decides on the NPU is the device test next to it: NPU511 keeps that test on CUDA when the branch builds or runs CUDA-only code, so the NPU takes the reference implementation, as a CPU did. The device rules leave selector values alone: NPU191 does not ask to compare them with `"npu"`, NPU500 does not follow them as devices. A name is a selector when the string values the file gives or compares it with include `"cuda"` and a word that names no device, or when it is spelled like one (`impl`, `implementation`).

    ## Example

    ```python
    def bias_act(x, b=None, impl='cuda'):        # NPU192 (info): a selector, kept
        assert impl in ['ref', 'cuda']
        if impl == 'cuda' and x.device.type == 'cuda' and _init():   # NPU511: stays on CUDA
            return _bias_act_cuda().apply(x, b)
        return _bias_act_ref(x, b)
    ```

    ## Fix safety

    No fix: the value is right as written. Suppress with `# npu-migrate: ignore[NPU192]`.

    ## Targets

    - **npu**: reports it as an info note (nothing to rewrite)
    - **portable**: the same note
    """

    code = "NPU192"
    supported_targets = frozenset({"npu", "portable"})
    name = "kernel-selector"
    summary = "A `\"cuda\"` that selects an implementation (`impl='cuda'` beside `impl='ref'`), not a device, is kept and noted"
    fix = Fix.NONE
    severity = Severity.INFO
    prefilter = r"""['"]cuda['"]"""

    # the notes come from the file's whole `ast` tree: the engine runs this once per file, after the
    # rules that rewrite (as it runs NPU599), and no piece of the file is parsed by LibCST for it
    final_sweep: ClassVar[bool] = True

    def sweep(self, new_text: str, new_tree: Any = None) -> None:
        """Note every selector's `"cuda"` of the original file, once per line."""
        selectors = self.context.model.derived(kernel_selectors)
        lines = self.context.source.splitlines()
        for line, name in sorted(selectors.lines.items()):
            text = lines[line - 1] if line <= len(lines) else ""
            col = max(text.find("'cuda'"), text.find('"cuda"')) + 1
            self.report_at(line, max(col, 1), f"{selectors.describe(name)}: `'cuda'` stays as written; the device "
                                              "test beside it decides which implementation runs on the NPU")


CASES = [
    Invalid(  # StyleGAN3's torch_utils/ops/bias_act.py, shortened
        """\
import torch


def bias_act(x, b=None, impl='cuda'):
    assert impl in ['ref', 'cuda']
    if impl == 'cuda' and x.device.type == 'cuda':
        return _bias_act_cuda(x, b)
    return _bias_act_ref(x, b)
""",
        codes=("NPU192",),
    ),
    Invalid(  # an option that selects an implementation: its values are the option's
        """\
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--impl", default="cuda", choices=["cuda", "ref"])
        """,
        codes=("NPU192",),
        lines=(3,),
    ),
    Valid(  # the defaults of a parser's options are not the values of one name `default`
        """\
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
        parser.add_argument("--checkpoint", default="cuda_model.pt")
        """,
    ),
    Valid(  # a device named `device`: NPU104's, not a selector
        """\
import torch
def run(x, device='cuda'):
    if device == 'cuda':
        return x
""",
    ),
]
