"""NPU400 `amp`: run the forward pass and the loss under `torch.autocast(device_type="npu")`.

Opt-in. bf16 by default (option `amp_dtype`); with fp16 a `torch.amp.GradScaler("npu")` is
created before the training loop, the backward pass and optimizer step go through it,
`scaler.unscale_(optimizer)` precedes gradient clipping and the scaler's state joins the
optimizer's in checkpoints. Evaluation loops get autocast alone. Files that already use AMP
(native or apex) and loops whose shape is not certain are left alone.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

import libcst as cst

from codemods.analyses.loops import (
    BlockPlan,
    Site,
    TrainingStep,
    append_elements,
    find_eval_loops,
    find_training_steps,
    insertion_data,
    sole_call,
    with_block,
)
from codemods.analyses.portable import device_name, require_device
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.model.cstnodes import code_of, find_all
from npu_migrate.core.diagnostics import Severity


class InsertAmp(Rule):
    """## What it does

    Wrap the forward pass and the loss of each training step (and of evaluation loops) in `torch.autocast(device_type="npu", dtype=torch.bfloat16)`; with fp16, route the step through a `torch.amp.GradScaler("npu")`.

    Opt-in: `npu-migrate apply --enable amp` (or `enable = ["amp"]` in `[tool.npu-migrate]`).

    ## Why

    Ascend's matrix units run bf16 and fp16 much faster than fp32, and a model migrated from CUDA
    usually trains in fp32 unless someone adds mixed precision. `torch.autocast(device_type="npu")` and
    `torch.amp.GradScaler("npu")` are the native APIs on torch_npu (its `AutoCastOps.cpp` registers the
    NPU autocast kernels for PrivateUse1, and the scaler ops `_amp_foreach_non_finite_check_and_unscale_`
    and `_amp_update_scale_` are supported: Ascend/pytorch `test/npu/test_amp.py`, `test/test_torch.py`).

    bf16 (the default) has fp32's exponent range, so gradients do not underflow and no scaler is
    needed. fp16 needs loss scaling: the rule then also inserts the scaler, the way the PyTorch AMP
    recipe does.

    ### What is recognised

    - **Training step**: a block (a loop body, or a function such as `train_step`) holding
      `<loss>.backward()` as a statement of its own, the loss assigned by the plain assignments just
      above it, and an optimizer `.step()` after it in the same iteration (directly, or in an `if`
      as with gradient accumulation). Autocast wraps the simple statements above `.backward()` that
      end with the (last) assignment of the loss, starting at the first assignment that computes
      something — the batch transfers (`x = x.to(device)`), unpacking and `zero_grad()` in front stay
      outside.
    - **Evaluation loop**: a `for` loop over batches (the iterable, possibly inside
      `enumerate`/`tqdm`/`iter`, is named like `loader`, `val_loader`, `test_dl`, `batches`, `dataset`,
      `data`, or is a call of a helper named so: `self.val_dataloader()`, `make_loader(ds)`), that runs with gradients disabled (`with torch.no_grad()` / `torch.inference_mode()`
      around it or as the first statement of its body, or `@torch.no_grad()` on the function), and
      feeds the batch to a model (`model(x)`, `self.net(batch)`: a local callable, not an imported
      function, given a loop variable); autocast wraps its simple statements after the batch
      transfers. No scaler. Library loops under `no_grad` (optimizer steps over `param_groups`,
      updates over `dict.items()`) are therefore not touched: over 920 candidate files of torch's own
      sources, the three rules change nothing.
    - **fp16**: `scaler = torch.amp.GradScaler("npu")` before the outermost training loop of the
      function; `scaler.scale(loss).backward()`; `scaler.step(optimizer)` followed by
      `scaler.update()`; `scaler.unscale_(optimizer)` right before `clip_grad_norm_` /
      `clip_grad_value_`; `"scaler": scaler.state_dict()` added to each dict literal that saves
      `optimizer.state_dict()` in that function (checkpoints). With gradient accumulation the scaled
      backward runs every iteration and unscale/step/update run where the optimizer steps.

    ### Left alone, with a diagnostic saying why

    - the file already uses AMP: `autocast`, `GradScaler`, apex (`amp.initialize`), `Accelerator(`,
      `mixed_precision` (info);
    - the loss is computed inside the `.backward()` call, or not by the statements just above it;
    - no optimizer `.step()` follows `.backward()` in the iteration;
    - several `.backward()` calls in one loop (GANs, several losses);
    - `.backward()` shares its line with other statements;
    - fp16 only: the step is a function of its own (the scaler must live with the loop that calls
      it), `optimizer.step(closure)`, several optimizers, or gradient clipping on iterations where the
      optimizer does not step (with accumulation: `scaler.unscale_` may run only once per `step()`,
      so the clipping has to move next to the step first).

    A framework's backward (`accelerator.backward(loss)`, `engine.backward(loss)`) is skipped
    silently: the framework owns precision. A loop without gradients disabled and without a backward
    pass is not an evaluation loop for certain and is skipped silently too.

    ## Example

    ```python
    # before
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    # after (default, bf16)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            out = model(x)
            loss = criterion(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    # after (amp-dtype = "float16")
    scaler = torch.amp.GradScaler("npu")
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="npu", dtype=torch.float16):
            out = model(x)
            loss = criterion(out, y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Options

    - `amp_dtype` (config key `amp-dtype`): `bfloat16` (default; also `bf16`) or `float16` (also
      `fp16`, `half`). Anything else is an error diagnostic and nothing is inserted.

    ## Fix safety

    Unsafe by nature: mixed precision changes the numerics on purpose. Compare the loss curve
    (`npu-migrate verify`). The rewrite keeps the program's structure: statements move into a `with`
    block (variables assigned there stay visible after it), comments move with them, nothing else is
    reformatted. Applying it twice inserts nothing the second time (autocast around a step means it
    is done). Loading an old checkpoint is untouched: add `scaler.load_state_dict(ckpt["scaler"])`
    yourself where you restore the optimizer. Suppress a loop with `# npu-migrate: ignore[NPU400]` on
    its `for` line or on its `.backward()` line.

    ## Targets

    - **npu**: rewrites to the torch_npu form (unsafe fix: review the change); opt-in
    - **portable**: the same insertion with the file's device, `torch.autocast(device_type=DEVICE.type, ..., enabled=DEVICE.type != "cpu")` and `torch.amp.GradScaler(DEVICE.type, enabled=DEVICE.type != "cpu")`: mixed precision on the GPU or NPU, the full precision a CPU run had before; opt-in
    """

    code = "NPU400"
    supported_targets = frozenset({"npu", "portable"})
    name = "amp"
    summary = ("Wrap the forward pass and loss in `torch.autocast(device_type=\"npu\")` "
               "(bf16; fp16 with a GradScaler)")
    fix = Fix.UNSAFE  # numerics change by design: review the loss curve
    default = False
    severity = Severity.WARNING
    prefilter = r"\.backward\(|no_grad|inference_mode"
    needs_torch_npu = True
    whole_statements = True  # a loop, the function around it and its checkpoint code

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.blocks: dict[int, BlockPlan] = {}  # id(original block) -> statement edits
        self.dicts: dict[int, tuple[str, str]] = {}  # id(original Dict) -> (scaler, key quote)
        self.top_level: dict[int, BlockPlan] = {}  # id(top-level loop) -> edits around it
        self.dtype_error_reported = False
        self.findings: list[tuple[cst.CSTNode, str, Severity | None]] = []

    def note(self, node: cst.CSTNode, message: str, severity: Severity | None = None) -> None:
        """A diagnostic found while planning; reported when the chunk is left (the runner keeps
        only what leave methods record)."""
        self.findings.append((node, message, severity))

    # -- file-level facts ----------------------------------------------------------------------
    @cached_property
    def dtype(self) -> str | None:
        wanted = str(self.context.options.get("amp_dtype") or "bfloat16").lower()
        return insertion_data()["amp_dtypes"].get(wanted)

    @cached_property
    def existing_amp(self) -> str | None:
        """The first AMP marker of the file (`autocast`, `GradScaler`, apex...), if any."""
        found = re.search(insertion_data()["amp_markers"], self.context.source)
        return found.group(0) if found else None

    @cached_property
    def torch_name(self) -> str:
        for local, target in self.context.facts.aliases.items():
            if target == "torch":
                return local
        self.context.require_import("torch")
        return "torch"

    def fresh_name(self, wanted: str) -> str:
        used = {n.id for n in ast.walk(self.context.facts.tree) if isinstance(n, ast.Name)}
        name = wanted
        while name in used:
            name = "npu_" + name if not name.startswith("npu_") else name + "_"
        return name

    # -- planning (on the original chunk) -----------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.blocks, self.dicts, self.findings, self.top_level = {}, {}, [], {}
        if self.dtype is None:
            if not self.dtype_error_reported:
                self.dtype_error_reported = True
                wanted = self.context.options.get("amp_dtype")
                self.note(node.body[0] if node.body else node,
                          f"unknown amp_dtype {wanted!r}: use bfloat16 or float16", severity=Severity.ERROR)
            return
        if self.target == "portable" and device_name(self.context.source) is None:
            self.note(node.body[0] if node.body else node, "the file binds both DEVICE and PORTABLE_DEVICE: "
                      "no portable device name is free for the autocast insertion", severity=Severity.WARNING)
            return
        steps = find_training_steps(node, self.resolve)
        for step in steps:
            self._plan_training(node, step)
        trained = {id(s.loop.stmt) for s in steps if s.loop}
        for loop in find_eval_loops(node, self.resolve):
            if id(loop.loop.stmt) in trained or loop.in_autocast or self.existing_amp:
                continue
            if self._suppressed(node, [loop.loop.stmt, loop.block.body[loop.region[0]]]):
                continue
            start, end = loop.region
            plan = self.blocks.setdefault(id(loop.block), BlockPlan())
            plan.wraps[start] = (end, self._autocast_maker())
            plan.notes.append((loop.block.body[start],
                               f"evaluation loop: wrapped in `{self._autocast_header()}`"))

    def _device(self) -> tuple[str, str]:
        """The device argument and the extra keywords: "npu", or the file's portable device,
        switched off on the CPU (which ran in full precision before)."""
        if self.target != "portable":
            return '"npu"', ""
        device = require_device(self.context)
        assert device is not None  # visit_Module reports and plans nothing otherwise
        return f"{device.value}.type", f', enabled={device.value}.type != "cpu"'

    def _autocast_header(self) -> str:
        device, extra = self._device()
        return f'{self.torch_name}.autocast(device_type={device}, dtype={self.torch_name}.{self.dtype}{extra})'

    def _autocast_maker(self):
        header = self._autocast_header()
        return lambda statements: with_block(header, statements)

    def _plan_training(self, module: cst.Module, step: TrainingStep) -> None:
        if step.in_autocast:
            return  # already AMP (our own earlier insertion, or the user's)
        backward_stmt = step.site.stmt
        if self.existing_amp:
            self.note(backward_stmt, f"left alone: the file already uses mixed precision "
                        f"(`{self.existing_amp}`)", severity=Severity.INFO)
            return
        if step.problems:
            # no optimizer step, or no loop or function: most likely no training loop at all
            unlikely = step.optimizer is None or (step.loop is None and step.site.function() is None)
            severity = Severity.INFO if unlikely else None
            self.note(backward_stmt, "no autocast inserted: " + "; ".join(step.problems[:2]), severity)
            return
        # the step finder records a problem wherever it found no region or no optimizer
        assert step.region is not None and step.optimizer is not None
        fp16 = self.dtype == "float16"
        if fp16 and step.scaler_problems:
            self.note(backward_stmt, "no fp16 autocast inserted (a GradScaler is needed): "
                        + "; ".join(step.scaler_problems[:2]) + "; bf16 (the default) needs none")
            return
        watched = [backward_stmt, step.site.block.body[step.region[0]]] + [s.stmt for s in step.steps]
        if step.loop:
            watched.append(step.loop.stmt)
        if self._suppressed(module, watched):
            return
        start, end = step.region
        plan = self.blocks.setdefault(id(step.site.block), BlockPlan())
        plan.wraps[start] = (end, self._autocast_maker())
        plan.notes.append((step.site.block.body[start],
                           f"wrapped the forward pass and loss in `{self._autocast_header()}`"))
        if fp16:
            self._plan_scaler(module, step, plan)

    def _plan_scaler(self, module: cst.Module, step: TrainingStep, plan: BlockPlan) -> None:
        assert step.optimizer is not None  # _plan_training returns before here otherwise
        scaler = self.fresh_name("scaler")
        optimizer = code_of(step.optimizer)
        loss = code_of(step.loss.with_changes(lpar=[], rpar=[]))
        # backward through the scaler
        plan.replace[step.site.index] = lambda stmt: _scale_backward(stmt, scaler)
        plan.notes.append((step.site.stmt, f"`{loss}.backward()` → `{scaler}.scale({loss}).backward()`"))
        for site in step.steps:
            target, index = self._plan_for(site)
            target.replace[index] = lambda stmt: _scaler_step(stmt, scaler)
            target.after.setdefault(index, []).append(
                cst.parse_statement(f"{scaler}.update()\n"))
            target.notes.append((site.stmt, f"`{optimizer}.step()` → `{scaler}.step({optimizer})`; "
                                             f"`{scaler}.update()` added"))
        for site in step.clips:
            target, index = self._plan_for(site)
            target.before.setdefault(index, []).append(
                cst.parse_statement(f"{scaler}.unscale_({optimizer})\n"))
            target.notes.append((site.stmt, f"`{scaler}.unscale_({optimizer})` added before "
                                            "gradient clipping"))
        outer = step.outer_loop
        assert outer is not None  # scaler_problems says so otherwise
        target, index = self._plan_for(outer)
        device, extra = self._device()
        creation = f"{scaler} = {self.torch_name}.amp.GradScaler({device}{extra})"
        target.before.setdefault(index, []).append(cst.parse_statement(creation + "\n"))
        target.notes.append((outer.stmt, f"`{creation}` added before the training loop"))
        for later in outer.block.body[outer.index:]:
            for found in find_all(later, cst.Dict):
                if any(_is_state_dict_of(e, optimizer) for e in found.elements) and not any(
                        _is_state_dict_of(e, scaler) for e in found.elements):
                    self.dicts[id(found)] = (scaler, _quote_of(found))

    def _plan_for(self, site: Site) -> tuple[BlockPlan, int]:
        """The plan holding edits around `site`, and the statement's index in it."""
        if isinstance(site.block, cst.Module):  # only loop statements get edits at the top level
            return self.top_level.setdefault(id(site.stmt), BlockPlan()), 0
        return self.blocks.setdefault(id(site.block), BlockPlan()), site.index

    def _suppressed(self, module: cst.Module, nodes: list[cst.CSTNode]) -> bool:
        suppressions = self.context.suppressions
        if not suppressions:
            return False
        from codemods.api.positions import node_positions

        where = node_positions(module, nodes)
        offset = self.context.line_offset
        return any(suppressions.suppresses(self.code, line + offset) for line, _ in where.values())

    # -- applying the plan ----------------------------------------------------------------------
    def _apply(self, original, updated):
        plan = self.blocks.get(id(original))
        if plan is None:
            return updated
        body = plan.apply(list(original.body), list(updated.body))
        if body is None:
            self.report(original, "no autocast inserted here: another rule moved statements of "
                        "this block; apply the insertion rules in a second run")
            return updated
        for node, message in plan.notes:
            self.fixed(node, message)
        return updated.with_changes(body=body)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return self._apply(original_node, updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        for node, message, severity in self.findings:
            self.report(node, message, severity=severity)
        # statements before a top-level loop go in here, after every rule has left the loop
        # (a FlattenSentinel from leave_For would keep later rules from seeing it); the runner
        # cannot place a Module for its suppression check, hence the fallback in _leave_loop
        if not self.top_level or self.context.suppressions:
            return updated_node
        plan = BlockPlan()
        for index, stmt in enumerate(original_node.body):
            found = self.top_level.get(id(stmt))
            if found is not None:
                plan.before[index] = found.before[0]
                plan.notes += found.notes
        body = plan.apply(list(original_node.body), list(updated_node.body))
        if body is None:
            return updated_node
        for node, message in plan.notes:
            self.fixed(node, message)
        return updated_node.with_changes(body=body)

    def _leave_loop(self, original_node, updated_node):
        plan = self.top_level.get(id(original_node))
        if plan is None or not self.context.suppressions:
            return updated_node
        for node, message in plan.notes:
            self.fixed(node, message)
        return cst.FlattenSentinel(plan.apply([original_node], [updated_node]))

    leave_For = _leave_loop
    leave_While = _leave_loop

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        wanted = self.dicts.get(id(original_node))
        if wanted is None:
            return updated_node
        scaler, quote = wanted
        element = cst.DictElement(cst.SimpleString(f"{quote}{scaler}{quote}"),
                                  cst.parse_expression(f"{scaler}.state_dict()"))
        elements = append_elements(list(updated_node.elements), [element],
                                   updated_node.lbrace.whitespace_after)
        self.fixed(original_node, f"checkpoint: added `{quote}{scaler}{quote}: {scaler}.state_dict()`")
        return updated_node.with_changes(elements=elements)


def _is_state_dict_of(element: cst.BaseDictElement, owner: str) -> bool:
    if not (isinstance(element, cst.DictElement) and isinstance(element.value, cst.Call)):
        return False
    func = element.value.func
    return isinstance(func, cst.Attribute) and func.attr.value == "state_dict" and code_of(func.value) == owner


def _quote_of(found: cst.Dict) -> str:
    for element in found.elements:
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
            return element.key.quote if element.key.quote in ("'", '"') else '"'
    return '"'


def _method_call_line(stmt: cst.CSTNode) -> tuple[cst.SimpleStatementLine, cst.Call, cst.Attribute]:
    """The line `x.method()` as the training-step finder found it (a sole call statement)."""
    call = sole_call(stmt)
    assert isinstance(stmt, cst.SimpleStatementLine) and call is not None and isinstance(call.func, cst.Attribute)
    return stmt, call, call.func


def _with_call(stmt: cst.SimpleStatementLine, call: cst.Call) -> cst.SimpleStatementLine:
    return stmt.with_changes(body=[stmt.body[0].with_changes(value=call)])


def _scale_backward(stmt: cst.CSTNode, scaler: str) -> cst.CSTNode:
    """`loss.backward()` → `scaler.scale(loss).backward()`."""
    line, call, func = _method_call_line(stmt)
    loss = func.value.with_changes(lpar=[], rpar=[])
    scaled = cst.Call(cst.parse_expression(f"{scaler}.scale"), [cst.Arg(loss)])
    return _with_call(line, call.with_changes(func=func.with_changes(value=scaled)))


def _scaler_step(stmt: cst.CSTNode, scaler: str) -> cst.CSTNode:
    """`optimizer.step()` → `scaler.step(optimizer)`."""
    line, call, func = _method_call_line(stmt)
    new_call = call.with_changes(func=cst.parse_expression(f"{scaler}.step"), args=[cst.Arg(func.value)])
    return _with_call(line, new_call)


CASES = [
    Invalid(
        """\
    import os
    import torch
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    """,
        after="""\
    import os
    import torch
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            out = model(x)
            loss = criterion(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    """,
    ),
    Valid(
        """\
    import os
    import torch
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            out = model(x)
            loss = criterion(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    """,
    ),
    Valid(
        """\
    import torch
    for b in dl:
        loss = model(b).loss
        accelerator.backward(loss)
        opt.step()
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
    import torch
    with torch.no_grad():
        for e, p in zip(ema, params):
            e.mul_(0.9).add_(p)
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
    import torch
    for x in loader:
        out = model(x)
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
    import torch
    with torch.set_grad_enabled(True):
        for x in loader:
            out = model(x)
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
    import torch
    class Opt:
        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                has = self._init_group(group)
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
    import torch
    @torch.no_grad()
    def squash(self):
        for name, cfg in self.data_groups.items():
            self.update_mask(name, **cfg)
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
    import torch
    @torch.no_grad()
    def count(loader):
        for x in loader:
            n = total(7)
    """,
        with_rules=('NPU100',),
        path='train.py',
    ),
    Invalid(
        """\
    import torch

    for x, y in loader:
        x = x.to(device)
        optimizer.zero_grad()
        # forward
        out = model(x)  # logits
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401

    for x, y in loader:
        x = x.to(device)
        optimizer.zero_grad()
        # forward
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            out = model(x)  # logits
            loss = criterion(out, y)
        loss.backward()
        optimizer.step()
    """,
        codes=('NPU100', 'NPU400'),
        with_rules=('NPU100',),
        path='train.py',
    ),
    Invalid(
        """\
    import torch as th

    def step(model, batch, opt):
        outputs = model(**batch)
        loss = outputs.loss / 4
        loss.backward()
        opt.step()
    """,
        after="""\
    import torch as th
    import torch_npu  # noqa: F401

    def step(model, batch, opt):
        with th.autocast(device_type="npu", dtype=th.bfloat16):
            outputs = model(**batch)
            loss = outputs.loss / 4
        loss.backward()
        opt.step()
    """,
        codes=('NPU100', 'NPU400'),
        with_rules=('NPU100',),
        path='train.py',
    ),
    Invalid(
        """\
    from torch import nn

    def train(net, data, sgd, crit):
        for i, (a, b) in enumerate(data):
            pred = net(a)
            loss = crit(pred, b)
            (loss / 2).backward()
            if i % 2 == 1:
                sgd.step()
                sgd.zero_grad()
    """,
        after="""\
    import torch_npu  # noqa: F401
    import torch
    from torch import nn

    def train(net, data, sgd, crit):
        for i, (a, b) in enumerate(data):
            with torch.autocast(device_type="npu", dtype=torch.bfloat16):
                pred = net(a)
                loss = crit(pred, b)
            (loss / 2).backward()
            if i % 2 == 1:
                sgd.step()
                sgd.zero_grad()
    """,
        codes=('NPU100', 'NPU400'),
        with_rules=('NPU100',),
        path='train.py',
    ),
    Invalid(
        """\
    import torch

    def evaluate(model, loader):
        with torch.no_grad():
            for x, y in loader:
                x = x.to("npu")
                pred = model(x)
                hits = (pred.argmax(1) == y).sum()
        return hits

    def evaluate2(model, loader):
        for x in loader:
            with torch.inference_mode():
                out = model(x)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401

    def evaluate(model, loader):
        with torch.no_grad():
            for x, y in loader:
                x = x.to("npu")
                with torch.autocast(device_type="npu", dtype=torch.bfloat16):
                    pred = model(x)
                    hits = (pred.argmax(1) == y).sum()
        return hits

    def evaluate2(model, loader):
        for x in loader:
            with torch.inference_mode():
                with torch.autocast(device_type="npu", dtype=torch.bfloat16):
                    out = model(x)
    """,
        codes=('NPU100', 'NPU400'),
        with_rules=('NPU100',),
        path='train.py',
    ),
    Invalid(
        """\
    import torch

    class Runner:
        @torch.no_grad()
        def predict(self, loader):
            for batch in loader:
                logits = self.model(batch)
                self.outputs.append(logits)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401

    class Runner:
        @torch.no_grad()
        def predict(self, loader):
            for batch in loader:
                with torch.autocast(device_type="npu", dtype=torch.bfloat16):
                    logits = self.model(batch)
                    self.outputs.append(logits)
    """,
        codes=('NPU100', 'NPU400'),
        with_rules=('NPU100',),
        path='train.py',
    ),
]
