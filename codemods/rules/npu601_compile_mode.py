"""NPU601 `compile-mode`: `torch.npu.set_compile_mode(jit_compile=False)` in a training script whose
shapes change from step to step."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.tune import TuneRule

API = "torch_npu.npu.set_compile_mode"
STATEMENT = "torch.npu.set_compile_mode(jit_compile=False)"


class CompileMode(TuneRule):
    """## What it does

    A training script whose input shapes change from step to step gets
    `torch.npu.set_compile_mode(jit_compile=False)` after its imports.

    Opt-in: `npu-migrate apply --enable tune` or `--enable compile-mode`.

    ## Why

    `set_compile_mode(jit_compile=...)` chooses how CANN runs an operator: `True` compiles it
    online for each new input shape (and caches the result), `False` runs the prebuilt binary
    kernels, which serve any shape. Online compilation of every new shape makes a program with
    dynamic shapes spend its first steps, and every step that meets a new shape, compiling. The
    default is `False` on Atlas A2/A3 and `True` on the Atlas training series (torch_npu
    `npu_config.py`; op-plugin's `set_compile_mode` page), so on the older chips such programs
    gain the most; on A2/A3 the statement states the default. 3 of 16 ModelZoo ports set it.

    **How dynamic shapes are decided** (per file, from the code, and the
    operations listed below): the file runs a training step (a `.backward()`
    call in a `__main__` script or in module-level code) and calls something whose output size
    depends on the data or on the batch: `torch.nonzero`, `masked_select`, `unique` (function or
    method), `pad_sequence` / `pack_padded_sequence` (each batch padded to its own longest
    sequence), or `F.interpolate` in a function that also draws a random number (a size picked per
    step, multi-scale training). Shapes that change only in the last batch of an epoch are NPU602's
    (`drop_last`). A file that already calls `set_compile_mode` is left alone. Markers in other
    files of the project are named by `npu-migrate analyze` (computation section) with this rule.
    A training script without dynamic shapes gets an info line instead (not an insertion): on the
    Atlas training series, whose default is `jit_compile=True`, the binary kernels also spare the
    online compilation of every operator at the first step, which is why ModelZoo ports set the
    mode in static-shape scripts too; on Atlas A2/A3 it would state the default. "A training
    script" is a `__main__` guard or module-level training in a file that calls `.backward()` or
    builds the optimizer (the step may run in another module).

    ## Example

    ```python
    # before
    import torch
    from torch.nn.utils.rnn import pad_sequence

    if __name__ == "__main__":
        for batch in loader:
            x = pad_sequence(batch, batch_first=True)
            model(x).sum().backward()
            optimizer.step()

    # after
    import torch
    from torch.nn.utils.rnn import pad_sequence
    torch.npu.set_compile_mode(jit_compile=False)

    if __name__ == "__main__":
        for batch in loader:
            x = pad_sequence(batch, batch_first=True)
            model(x).sum().backward()
            optimizer.step()
    ```

    ## Fix safety

    Safe for the values computed: the binary and the online-compiled kernel of an operator compute
    the same function; only how the kernel is obtained changes. (Unsafe is declared for the family
    as a whole; this rule is the one that changes no numbers.)

    ## Targets

    - **npu**: inserts the torch_npu call (safe fix); opt-in; needs torch_npu 1.8 (`target-version`)
    - **portable**: reports only (`torch.npu` is torch_npu code)
    """

    code = "NPU601"
    name = "compile-mode"
    summary = "`torch.npu.set_compile_mode(jit_compile=False)` in a training script with dynamic shapes"
    prefilter = r"\.backward\(|optim"
    needs_torch_npu = True
    api = API

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self.training_start(original_node):
            return updated_node
        facts = self.facts
        if facts.compile_mode_set:
            return updated_node
        if not facts.dynamic_shapes:
            self.report(original_node, f"`{STATEMENT}` not inserted: no dynamic shape in this file. On the Atlas "
                                       "training series, whose default is `jit_compile=True`, it also spares the "
                                       "online compilation of every operator at the first step (ModelZoo ports set "
                                       "it in static-shape scripts too); on Atlas A2/A3 it is the default")
            return updated_node
        first = facts.dynamic_shapes[0]
        if self.version_blocks(original_node, f"`{STATEMENT}`"):
            return updated_node
        if not self.report_only:  # under --target portable the insertion is only reported
            self.context.definitions.add(STATEMENT)
            self.context.require_import("torch")
        self.fixed(original_node, f"added `{STATEMENT}` after the imports: the training step meets "
                                  f"dynamic shapes (line {first.line}: {first.message}); binary kernels "
                                  "serve every shape without compiling each one online")
        return updated_node


CASES = [
    Invalid(
        """\
        import torch

        if __name__ == "__main__":
            for x, mask in loader:
                kept = x[torch.nonzero(mask)]
                model(kept).sum().backward()
                optimizer.step()
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401
        torch.npu.set_compile_mode(jit_compile=False)

        if __name__ == "__main__":
            for x, mask in loader:
                kept = x[torch.nonzero(mask)]
                model(kept).sum().backward()
                optimizer.step()
        """,
        codes=("NPU601", "NPU100"),
        with_rules=("NPU100",),
    ),
    # the version gate: torch_npu 1.5 has no set_compile_mode
    Invalid(
        """\
        import torch

        if __name__ == "__main__":
            for x, mask in loader:
                model(x[torch.nonzero(mask)]).sum().backward()
        """,
        options=(("target_version", "1.5"),),
    ),
    # static shapes: reported (the Atlas training series still compiles each operator online)
    Invalid(
        """\
        import torch

        if __name__ == "__main__":
            for x, y in loader:
                model(x).sum().backward()
                optimizer.step()
        """,
    ),
    # already set
    Valid(
        """\
        import torch
        import torch_npu
        torch.npu.set_compile_mode(jit_compile=True)

        if __name__ == "__main__":
            for x, mask in loader:
                model(x[torch.nonzero(mask)]).sum().backward()
        """,
    ),
]
