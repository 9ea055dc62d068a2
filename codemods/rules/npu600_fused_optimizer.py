"""NPU600 `fused-optimizer`: `torch.optim.Adam/AdamW/SGD/Adadelta/RMSprop` become torch_npu's fused
optimizers where every argument maps exactly."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.families.tune import TuneRule, data
from codemods.model.cstnodes import code_of, dotted_expr

API = "torch_npu.optim fused optimizers"


class FusedOptimizer(TuneRule):
    """## What it does

    `torch.optim.Adam`, `AdamW`, `SGD`, `Adadelta` and `RMSprop` become `torch_npu.optim.NpuFusedAdam`,
    `NpuFusedAdamW`, `NpuFusedSGD`, `NpuFusedAdadelta` and `NpuFusedRMSprop` when every argument maps
    exactly; anything else stays and is reported with the reason.

    Opt-in: `npu-migrate apply --enable tune` (the whole family) or `--enable fused-optimizer`.

    ## Why

    torch_npu's fused optimizers (`torch_npu/optim/npu_fused_*.py`) copy all parameters, gradients
    and optimizer states of a dtype into one contiguous buffer at their first step and then update
    that buffer with a handful of kernels, where `torch.optim` launches several kernels per
    parameter tensor. The update formulas are torch's own (same defaults: `NpuFusedAdamW`'s
    `weight_decay=1e-2`, `NpuFusedAdam`'s L2 penalty, SGD's momentum buffer started from the
    first gradient). 11 of 16 ModelZoo ports read beside their upstream use them.

    What maps: the positional and keyword arguments the fused class has (`lr`, `betas`, `eps`,
    `weight_decay`, `amsgrad`, `momentum`, `dampening`, `nesterov`, `rho`, `alpha`, `centered`);
    `foreach` and `fused` (how torch runs the update, not what it computes) are dropped;
    `maximize`, `capturable`, `differentiable`, `decoupled_weight_decay` are accepted at their
    default `False` only. `NpuFusedSGD` has no default learning rate: `SGD` without `lr` stays.

    The rule does not rewrite when the same file shows what breaks the combined buffers (each
    reported with its line): a module's `zero_grad()` (sets gradients to None in torch >= 2.0, so
    the next backward writes new tensors the fused step never reads), `zero_grad(set_to_none=True)`
    (the fused optimizers raise ValueError), an assignment to `.grad`, `add_param_group`, or a model
    converted to bfloat16 (fused optimizers take float32 and float16 parameters only). It
    rewrites only in a file that runs the training step (a `.backward()` call), so that these
    checks see the code that uses the optimizer; an optimizer built in a helper of another file is
    reported.

    ## Example

    ```python
    # before
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()

    # after
    optimizer = torch_npu.optim.NpuFusedAdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    ```

    ## Fix safety

    Unsafe: the update is the same formula, but two behaviours differ. `zero_grad()` of a fused
    optimizer fills gradients with zeros instead of setting them to None, and from its first step
    it updates every parameter that had a gradient then, also in a later step where that parameter
    got none (torch skips a parameter whose gradient is None). A model whose every trainable
    parameter gets a gradient each step (the usual case) computes the same numbers: proven by
    `npu-migrate verify` on the bench scripts and by `tests/tune`, where the emulation's
    reference implementation (under `python -m npu_migrate.emulation`, combined buffers included)
    steps the same as torch. Checkpoints: the fused state dict has the same keys.

    ## Targets

    - **npu**: rewrites to the torch_npu form (unsafe fix); opt-in; needs torch_npu 1.8 (`target-version`)
    - **portable**: reports only (fused optimizers are torch_npu code)
    """

    code = "NPU600"
    name = "fused-optimizer"
    summary = "`torch.optim.Adam/AdamW/SGD/Adadelta/RMSprop` become torch_npu's fused optimizers where the arguments map"
    prefilter = r"\b(?:Adam|AdamW|SGD|Adadelta|RMSprop)\b"
    needs_torch_npu = True
    api = API

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self.resolve(original_node.func)
        spec = data()["optimizers"].get(name or "")
        if spec is None:
            return updated_node
        short = f"`{name}`"
        problem = self._unmappable(original_node, spec) or self._blocked()
        if problem is not None:
            self.report(original_node, f"{short} stays: {problem}")
            return updated_node
        if self.version_blocks(original_node, f"{short} -> `{spec['npu']}`"):
            return updated_node
        args = [a for a in updated_node.args if not (a.keyword and a.keyword.value in spec["dropped"])]
        args = args[:-1] + [args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)] if args else args
        dropped = [a.keyword.value for a in updated_node.args if a.keyword and a.keyword.value in spec["dropped"]]
        note = f" (dropped {', '.join(f'`{d}`' for d in dropped)}: how torch runs the update)" if dropped else ""
        self.fixed(original_node, f"{short} -> `{spec['npu']}`: the fused update over combined buffers{note}")
        return updated_node.with_changes(func=dotted_expr(spec["npu"]), args=args)

    def _unmappable(self, call: cst.Call, spec: dict[str, Any]) -> str | None:
        if any(a.star for a in call.args):
            return "`*args`/`**kwargs`: the arguments cannot be checked"
        positional = [a for a in call.args if not a.keyword]
        if len(positional) > len(spec["positional"]):
            return "more positional arguments than the fused optimizer takes"
        given = set(spec["positional"][:len(positional)]) | {a.keyword.value for a in call.args if a.keyword}
        positional_names = dict(zip(spec["positional"], positional))
        for dropped in spec["dropped"]:  # a positional foreach (Adadelta, RMSprop) cannot be dropped
            if dropped in positional_names:
                return f"`{dropped}` is passed positionally"
        for key, default in spec["must_be"].items():
            arg = positional_names.get(key) or next((a for a in call.args if a.keyword and a.keyword.value == key), None)
            if arg is not None and code_of(arg.value) != default:
                return f"`{key}={code_of(arg.value)}` has no fused counterpart (only `{key}={default}` maps)"
        missing = [r for r in spec["required"] if r not in given]
        if missing:
            return f"`{missing[0]}` is not given and the fused optimizer has no default for it"
        known = set(spec["positional"]) | set(spec["must_be"]) | set(spec["dropped"])
        unknown = sorted(given - known)
        return f"`{unknown[0]}` has no fused counterpart" if unknown else None

    def _blocked(self) -> str | None:
        facts = self.facts
        if not facts.training_lines:
            return ("no training step (`.backward()`) in this file: the code that uses the optimizer "
                    "cannot be checked for what breaks the fused buffers (see the rule's page)")
        if facts.optimizer_blockers:
            first = facts.optimizer_blockers[0]
            return f"line {first.line}: {first.message}"
        return None


CASES = [
    Invalid(
        """\
        import torch

        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
        for x in data:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        """,
        after="""\
        import torch
        import torch_npu  # noqa: F401

        model = torch.nn.Linear(4, 2)
        optimizer = torch_npu.optim.NpuFusedAdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        for x in data:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        """,
        codes=("NPU600", "NPU100"),
        with_rules=("NPU100",),
    ),
    Invalid(
        """\
        from torch import optim

        opt = optim.SGD(net.parameters(), 0.1, momentum=0.9)
        for x in data:
            opt.zero_grad()
            net(x).sum().backward()
            opt.step()
        """,
        after="""\
        import torch_npu  # noqa: F401
        from torch import optim

        opt = torch_npu.optim.NpuFusedSGD(net.parameters(), 0.1, momentum=0.9)
        for x in data:
            opt.zero_grad()
            net(x).sum().backward()
            opt.step()
        """,
        codes=("NPU600", "NPU100"),
        with_rules=("NPU100",),
    ),
    # maximize has no fused counterpart: reported, kept
    Invalid(
        """\
        import torch
        optimizer = torch.optim.Adam(model.parameters(), maximize=True)
        loss.backward()
        """,
    ),
    # a module's zero_grad() sets gradients to None: the fused buffers would go stale
    Invalid(
        """\
        import torch
        optimizer = torch.optim.Adam(model.parameters())
        model.zero_grad()
        loss.backward()
        optimizer.step()
        """,
    ),
    # the version gate: torch_npu 1.5 has no fused optimizers
    Invalid(
        """\
        import torch
        optimizer = torch.optim.Adam(model.parameters())
        loss.backward()
        """,
        options=(("target_version", "1.5"),),
    ),
    Valid("import torch\noptimizer = torch.optim.LBFGS(model.parameters())\nloss.backward()\n"),
]
