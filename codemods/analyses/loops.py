"""Recognising training steps and evaluation loops in a LibCST tree (pure: no I/O, no edits).

A *training step* is a block of statements holding `<loss>.backward()`, with the loss computed
by the statements just above it and an optimizer `.step()` after it (in the same block or in a
nested one, as with gradient accumulation). An *evaluation loop* is a `for` loop that runs with
gradients disabled and calls a model. The insertion rules (NPU400-NPU449) act on what this
module finds; when the shape is not certain it says why in `problems` instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import libcst as cst

from codemods.data.tables import load_data
from codemods.model.cstnodes import code_of, find_all

Block = cst.Module | cst.IndentedBlock
Resolve = Callable[[cst.CSTNode], "str | None"]
LOOPS = (cst.For, cst.While)
SCOPES = (cst.FunctionDef, cst.ClassDef)


@cache
def insertion_data() -> dict[str, Any]:
    """Names and patterns the insertion rules rely on (codemods/data/insertion.json)."""
    return load_data("insertion.json")


def _pattern(key: str) -> re.Pattern[str]:
    return re.compile(insertion_data()[key])


# -- statement structure ---------------------------------------------------------------------

@dataclass(frozen=True)
class Site:
    """Where a statement lives: `block.body[index]`, inside the compound statements `owners`
    (outermost first), each of which sits at the matching `(block, index)` of `parents`."""

    block: Block
    index: int
    owners: tuple[cst.CSTNode, ...] = ()
    parents: tuple[tuple[Block, int], ...] = ()

    @property
    def stmt(self) -> cst.CSTNode:
        return self.block.body[self.index]

    def scope_owners(self) -> list[tuple[cst.CSTNode, tuple[Block, int]]]:
        """Enclosing compound statements inside the same function, innermost first."""
        found = []
        for owner, parent in zip(reversed(self.owners), reversed(self.parents)):
            if isinstance(owner, SCOPES):
                break
            found.append((owner, parent))
        return found

    def function(self) -> cst.FunctionDef | None:
        for owner in reversed(self.owners):
            if isinstance(owner, cst.FunctionDef):
                return owner
            if isinstance(owner, cst.ClassDef):
                return None
        return None


def suites(stmt: cst.CSTNode) -> list[cst.IndentedBlock]:
    """The indented blocks directly owned by a compound statement."""
    found: list[cst.BaseSuite] = []
    if isinstance(stmt, (cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef)):
        found.append(stmt.body)
        orelse = getattr(stmt, "orelse", None)
        if orelse is not None:
            found.append(orelse.body)
    elif isinstance(stmt, cst.If):
        found.append(stmt.body)
        orelse = stmt.orelse
        if isinstance(orelse, cst.If):
            found += suites(orelse)
        elif orelse is not None:
            found.append(orelse.body)
    elif isinstance(stmt, (cst.Try, cst.TryStar)):
        found.append(stmt.body)
        found += [h.body for h in stmt.handlers]
        for extra in (stmt.orelse, stmt.finalbody):
            if extra is not None:
                found.append(extra.body)
    elif isinstance(stmt, cst.Match):
        found += [case.body for case in stmt.cases]
    return [s for s in found if isinstance(s, cst.IndentedBlock)]


def walk(block: Block, owners: tuple[cst.CSTNode, ...] = (), parents: tuple[tuple[Block, int], ...] = (),
         start: int = 0) -> Iterator[Site]:
    """Every statement of `block` from `start` on, nested ones included, in source order."""
    for index in range(start, len(block.body)):
        stmt = block.body[index]
        yield Site(block, index, owners, parents)
        for child in suites(stmt):
            yield from walk(child, owners + (stmt,), parents + ((block, index),))


def sole_call(stmt: cst.CSTNode) -> cst.Call | None:
    """The call of a statement line that is nothing but one call expression."""
    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
        return stmt.body[0].value
    return None


def method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    return find_all(node, cst.Call)


def assigned_names(stmt: cst.CSTNode) -> set[str]:
    """Names bound by the assignments of a simple statement line."""
    names: set[str] = set()
    if not isinstance(stmt, cst.SimpleStatementLine):
        return names
    for small in stmt.body:
        targets: list[cst.CSTNode] = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            targets = [small.target]
        for target in targets:
            names |= target_names(target)
    return names


def target_names(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: set[str] = set()
        for element in target.elements:
            found |= target_names(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return set()


def is_assignment_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Assign, cst.AugAssign)) or (isinstance(s, cst.AnnAssign) and s.value)
        for s in stmt.body)


def is_transfer_call(call: cst.Call) -> bool:
    return method_name(call) in insertion_data()["transfer_methods"]


def is_transfer_line(stmt: cst.CSTNode) -> bool:
    """`x, y = x.to(device), y.to(device)` and the like: moving the batch, not computing."""
    calls = calls_in(stmt)
    helpers = set(insertion_data()["container_methods"])
    return (any(is_transfer_call(c) for c in calls)
            and all(is_transfer_call(c) or method_name(c) in helpers for c in calls))


def is_model_call(call: cst.Call, resolve: Resolve) -> bool:
    """`model(x)`, `self.net(x)`, `evaluate(model, batch)`: a call of something defined locally,
    neither a builtin nor an imported function."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value not in insertion_data()["builtins"] and resolve(func) is None
    return (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
            and not func.attr.value.startswith("_"))


def in_autocast(owners: tuple[cst.CSTNode, ...]) -> bool:
    for owner in owners:
        if isinstance(owner, cst.With):
            for item in owner.items:
                call = item.item
                if isinstance(call, cst.Call) and code_of(call.func).split(".")[-1] == "autocast":
                    return True
    return False


def grad_disabled(owner: cst.CSTNode, resolve: Resolve) -> bool:
    """`with torch.no_grad():`, `with torch.inference_mode():`, `@torch.no_grad()` on a def."""
    wanted = set(insertion_data()["grad_disabling"])
    exprs: list[cst.CSTNode] = []
    if isinstance(owner, cst.With):
        exprs = [item.item for item in owner.items]
    elif isinstance(owner, cst.FunctionDef):
        exprs = [d.decorator for d in owner.decorators]
    for expr in exprs:
        func = expr.func if isinstance(expr, cst.Call) else expr
        if resolve(func) in wanted:
            if (isinstance(expr, cst.Call) and resolve(func) == "torch.set_grad_enabled"
                    and not _only_argument_false(expr)):
                continue
            return True
    return False


def _only_argument_false(call: cst.Call) -> bool:
    """`torch.set_grad_enabled(False)`."""
    return (len(call.args) == 1 and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == "False")


# -- training steps ----------------------------------------------------------------------------

@dataclass
class TrainingStep:
    site: Site  # the `loss.backward()` statement
    loss: cst.BaseExpression  # what `.backward()` is called on
    region: tuple[int, int] | None = None  # [start, end) of site.block.body to run under autocast
    steps: list[Site] = field(default_factory=list)  # statements calling `optimizer.step()`
    optimizer: cst.BaseExpression | None = None
    clips: list[Site] = field(default_factory=list)  # gradient clipping between backward and step
    loop: Site | None = None  # innermost enclosing loop statement (same function)
    outer_loop: Site | None = None  # outermost enclosing loop statement (same function)
    in_autocast: bool = False
    problems: list[str] = field(default_factory=list)  # why the shape is not certain
    scaler_problems: list[str] = field(default_factory=list)  # why a GradScaler cannot be added


def _loop_sites(site: Site) -> list[Site]:
    """Sites of the enclosing loop statements in the same function, innermost first."""
    found = []
    for owner, (block, index) in site.scope_owners():
        if isinstance(owner, LOOPS):
            depth = site.owners.index(owner)
            found.append(Site(block, index, site.owners[:depth], site.parents[:depth]))
    return found


def _after(site: Site, stop: cst.CSTNode | None) -> Iterator[Site]:
    """Statements that run after `site` in the same iteration: the rest of its block, then the
    rest of each enclosing block up to the loop statement `stop` (or the function)."""
    yield from walk(site.block, site.owners, site.parents, site.index + 1)
    for depth in range(len(site.owners) - 1, -1, -1):
        owner = site.owners[depth]
        if owner is stop or isinstance(owner, SCOPES):
            return
        block, index = site.parents[depth]
        yield from walk(block, site.owners[:depth], site.parents[:depth], index + 1)


def _is_optimizer(expr: cst.CSTNode) -> bool:
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return False
    last = expr.value if isinstance(expr, cst.Name) else expr.attr.value
    return not _pattern("not_optimizers").search(last)


def find_training_steps(module: cst.Module, resolve: Resolve) -> list[TrainingStep]:
    found: list[TrainingStep] = []
    for site in walk(module):
        stmt = site.stmt
        backward = [c for c in calls_in(stmt) if method_name(c) == "backward"] \
            if isinstance(stmt, cst.SimpleStatementLine) else []
        if not backward:
            continue
        func = backward[0].func
        assert isinstance(func, cst.Attribute)  # method_name() found `.backward`
        receiver = func.value
        if resolve(receiver) is not None:
            continue  # `torch.autograd.backward(loss)`: a module function, not a loss tensor
        # `accelerator.backward(loss)`, `engine.backward(loss)`: a framework owns precision
        if backward[0].args and not _assigned_before(site, receiver):
            continue
        found.append(_training_step(site, backward[0], resolve))
    _flag_shared_loops(found)
    return found


def _assigned_before(site: Site, receiver: cst.CSTNode) -> bool:
    names = {n.value for n in find_all(receiver, cst.Name)}
    return any(names & assigned_names(s) for s in site.block.body[:site.index])


def _training_step(site: Site, backward: cst.Call, resolve: Resolve) -> TrainingStep:
    assert isinstance(backward.func, cst.Attribute)  # a `.backward()` call
    receiver = backward.func.value
    # already under autocast: around the backward pass, or around the statements just above it
    earlier = tuple(s for s in site.block.body[:site.index] if isinstance(s, cst.With))
    step = TrainingStep(site, receiver, in_autocast=in_autocast(site.owners + earlier))
    loops = _loop_sites(site)
    step.loop = loops[0] if loops else None
    step.outer_loop = loops[-1] if loops else None
    problems = step.problems
    if sole_call(site.stmt) is not backward:
        problems.append("`.backward()` is not a statement of its own")
    if step.loop is None and site.function() is None:
        problems.append("the backward pass is neither in a loop nor in a function")
    names = _loss_roots(receiver)
    anchor = next((i for i in range(site.index - 1, -1, -1)
                   if names & assigned_names(site.block.body[i])), None)
    if not names:
        problems.append("the loss is computed inside the `.backward()` call; assign it to a "
                        "variable first")
    elif anchor is None:
        problems.append(f"the loss `{code_of(receiver)}` is not computed in the statements "
                        "just above `.backward()`")
    elif not is_assignment_line(site.block.body[anchor]):
        problems.append(f"the loss `{code_of(receiver)}` is computed in a statement that is "
                        "not a plain assignment")
    else:
        # back over the simple statements above the loss, then forward past the ones that only
        # prepare the batch (transfers, unpacking, zero_grad, logging)
        body = site.block.body
        start = anchor
        while start > 0 and _is_simple_line(body[start - 1]):
            start -= 1
        while start < anchor and not _is_forward_line(body[start]):
            start += 1
        region = body[start:anchor + 1]
        if not any(not is_transfer_call(c) for s in region for c in calls_in(s)):
            problems.append("no forward call found in the statements that compute the loss")
        else:
            step.region = (start, anchor + 1)
    _find_optimizer(step, loops[0].stmt if loops else None)
    return step


def _loss_roots(expr: cst.CSTNode) -> set[str]:
    """Names a loss expression is read from: `loss`, `out.loss`, `loss.mean()`, `(a + b) / 2`;
    nothing for a loss computed on the spot (`criterion(out, y)`)."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, (cst.Attribute, cst.Subscript)):
        return _loss_roots(expr.value)
    if isinstance(expr, cst.Call):
        return _loss_roots(expr.func.value) if isinstance(expr.func, cst.Attribute) else set()
    if isinstance(expr, cst.BinaryOperation):
        return _loss_roots(expr.left) | _loss_roots(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _loss_roots(expr.expression)
    return set()


def _is_simple_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Expr)) for s in stmt.body)


def _is_forward_line(stmt: cst.CSTNode) -> bool:
    """An assignment that computes something: it calls more than transfers."""
    return (is_assignment_line(stmt) and not is_transfer_line(stmt)
            and any(not is_transfer_call(c) for c in calls_in(stmt)))


def _find_optimizer(step: TrainingStep, loop: cst.CSTNode | None) -> None:
    clip_names = set(insertion_data()["clip_functions"])
    optimizers: dict[str, cst.BaseExpression] = {}
    for later in _after(step.site, loop):
        for call in calls_in(later.stmt) if not suites(later.stmt) else _header_calls(later.stmt):
            name = method_name(call) or (call.func.value if isinstance(call.func, cst.Name) else None)
            if name == "backward":
                step.problems.append("several `.backward()` calls in one iteration")
                return
            if name in clip_names and not step.steps:
                step.clips.append(later)
            if name == "step" and isinstance(call.func, cst.Attribute) and _is_optimizer(call.func.value):
                optimizers.setdefault(code_of(call.func.value), call.func.value)
                if sole_call(later.stmt) is call and not call.args:
                    step.steps.append(later)
                else:
                    step.scaler_problems.append(
                        f"`{code_of(call)}` is not a plain statement without arguments")
    if not optimizers:
        step.problems.append("no optimizer `.step()` follows `.backward()` in this iteration")
        return
    if len(optimizers) > 1:
        step.scaler_problems.append("several optimizers step here (" + ", ".join(optimizers) + ")")
    step.optimizer = next(iter(optimizers.values()))
    if any(all(clip.block is not s.block for s in step.steps) for clip in step.clips):
        # unscale_ may run once per step(): clipping on accumulation iterations would repeat it
        step.scaler_problems.append("gradient clipping runs where the optimizer does not step "
                                    "(gradient accumulation); clip next to `optimizer.step()`")
    if step.loop is None:
        step.scaler_problems.append(
            "the training step is a function of its own; create the GradScaler where the loop "
            "that calls it lives and pass it in")


def _header_calls(stmt: cst.CSTNode) -> list[cst.Call]:
    """Calls in a compound statement's header (its body is walked separately)."""
    header: list[cst.CSTNode] = []
    if isinstance(stmt, (cst.If, cst.While)):
        header = [stmt.test]
    elif isinstance(stmt, cst.For):
        header = [stmt.iter]
    elif isinstance(stmt, cst.With):
        header = list(stmt.items)
    return [c for h in header for c in calls_in(h)]


def _flag_shared_loops(steps: list[TrainingStep]) -> None:
    by_loop: dict[int, list[TrainingStep]] = {}
    for step in steps:
        if step.loop is not None:
            by_loop.setdefault(id(step.loop.stmt), []).append(step)
    for group in by_loop.values():
        if len(group) > 1:
            for step in group:
                step.problems.append("several `.backward()` calls in one loop (several models "
                                     "or losses)")


# -- evaluation loops --------------------------------------------------------------------------

@dataclass
class EvalLoop:
    loop: Site  # the `for` statement
    block: cst.IndentedBlock  # the block holding the region (the loop body or a no_grad body)
    region: tuple[int, int]
    in_autocast: bool


def find_eval_loops(module: cst.Module, resolve: Resolve) -> list[EvalLoop]:
    found = []
    for site in walk(module):
        loop = site.stmt
        if not isinstance(loop, cst.For) or not isinstance(loop.body, cst.IndentedBlock):
            continue
        if not _iterates_data(loop.iter) or any(method_name(c) == "backward" for c in calls_in(loop.body)):
            continue
        owners = site.owners + (loop,)
        block = loop.body
        disabled = any(grad_disabled(o, resolve) for o, _ in site.scope_owners()) or (
            (function := site.function()) is not None and grad_disabled(function, resolve))
        first = block.body[0] if block.body else None
        if not disabled and isinstance(first, cst.With) and grad_disabled(first, resolve) \
                and isinstance(first.body, cst.IndentedBlock):
            block, owners, disabled = first.body, owners + (first,), True
        if not disabled:
            continue
        region = _eval_region(block, resolve, target_names(loop.target))
        if region is not None:
            found.append(EvalLoop(site, block, region, in_autocast(owners)))
    return found


def _iterates_data(expr: cst.CSTNode) -> bool:
    """`loader`, `self.val_loader`, `enumerate(tqdm(test_dl))`: a loop over batches, by name; also
    over what a loader helper returns (`self.val_dataloader()`, `make_loader(ds)`)."""
    while isinstance(expr, cst.Call) and expr.args and code_of(expr.func) in insertion_data()["loader_wrappers"]:
        expr = expr.args[0].value
    if isinstance(expr, cst.Call) and (isinstance(expr.func, cst.Name)
                                       or (isinstance(expr.func, cst.Attribute) and not expr.args)):
        expr = expr.func
    if isinstance(expr, cst.Name):
        last = expr.value
    elif isinstance(expr, cst.Attribute):
        last = expr.attr.value
    else:
        return False
    return bool(_pattern("data_names").search(last))


def _eval_region(block: cst.IndentedBlock, resolve: Resolve, batch: set[str]) -> tuple[int, int] | None:
    """The statements after the batch transfers, if one of them feeds the batch to a model."""
    body = block.body
    start = 0
    while start < len(body) and is_transfer_line(body[start]):
        batch = batch | assigned_names(body[start])
        start += 1
    end = start
    while end < len(body) and _is_eval_line(body[end]):
        end += 1
    for stmt in body[start:end]:
        for call in calls_in(stmt):
            if is_model_call(call, resolve) and any(
                    batch & {n.value for n in find_all(arg.value, cst.Name)}
                    for arg in call.args):
                return start, end
    return None


def _is_eval_line(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and not is_transfer_line(stmt)
            and all(isinstance(s, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr))
                    for s in stmt.body))


# -- editing helpers shared by the insertion rules -----------------------------------------------

@dataclass
class BlockPlan:
    """Statement-level edits of one block, by index into the block's ORIGINAL body; applied to
    the updated body (other rules may have rewritten statements in place, never removed any)."""

    wraps: dict[int, tuple[int, Callable[[list[Any]], cst.BaseCompoundStatement]]] = field(default_factory=dict)
    before: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    after: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    replace: dict[int, Callable[[cst.CSTNode], cst.CSTNode]] = field(default_factory=dict)
    notes: list[tuple[cst.CSTNode, str]] = field(default_factory=list)  # (original node, message)

    def indices(self) -> set[int]:
        used = set(self.before) | set(self.after) | set(self.replace)
        for start, (end, _) in self.wraps.items():
            used |= set(range(start, end))
        return used

    def apply(self, original: list[Any], updated: list[Any]) -> list[Any] | None:
        """The new body, or None when another rule moved statements so that the planned ones
        cannot be found again."""
        mapping = align(original, updated)
        if any(i not in mapping for i in self.indices()):
            return None
        for start, (end, _) in self.wraps.items():
            moved = [mapping[i] - mapping[start] for i in range(start, end)]
            if moved != list(range(end - start)):
                return None
        at = {mapping[i]: i for i in self.indices()}  # updated index -> original index
        body = list(updated)
        out: list[Any] = []
        index = 0
        while index < len(body):
            source = at.get(index)
            for stmt in self.before.get(source, ()) if source is not None else ():
                out.append(_take_blank_lines(stmt, body, index))
            if source is not None and source in self.wraps:
                end, make = self.wraps[source]
                count = end - source
                inner = [self.replace.get(source + k, _same)(body[index + k]) for k in range(count)]
                out.append(wrap(inner, make))
                for k in range(count):
                    out += self.after.get(source + k, [])
                index += count
                continue
            out.append(self.replace.get(source, _same)(body[index]) if source is not None else body[index])
            if source is not None:
                out += self.after.get(source, [])
            index += 1
        return out


def align(original: list[Any], updated: list[Any]) -> dict[int, int]:
    """Original statement index -> updated index. Other rules rewrite statements in place and
    rarely add or remove one; statement kinds are enough to line the two bodies up."""
    if len(original) == len(updated):
        return {i: i for i in range(len(original))}
    from difflib import SequenceMatcher

    kinds = [[_kind(s) for s in body] for body in (original, updated)]
    mapping: dict[int, int] = {}
    for block in SequenceMatcher(None, kinds[0], kinds[1], autojunk=False).get_matching_blocks():
        for k in range(block.size):
            mapping[block.a + k] = block.b + k
    return mapping


def _kind(stmt: cst.CSTNode) -> str:
    if isinstance(stmt, cst.SimpleStatementLine):
        return "|".join(type(s).__name__ for s in stmt.body)
    return type(stmt).__name__


def _same(node: cst.CSTNode) -> cst.CSTNode:
    return node


def _take_blank_lines(new: cst.BaseStatement, body: list[Any], index: int) -> cst.BaseStatement:
    """An inserted statement takes the blank lines above its successor (but not its comments),
    so it sits with the code it belongs to."""
    successor = body[index]
    lines = list(successor.leading_lines)
    blank = 0
    while blank < len(lines) and lines[blank].comment is None:
        blank += 1
    if blank:
        body[index] = successor.with_changes(leading_lines=lines[blank:])
        return new.with_changes(leading_lines=lines[:blank])
    return new


def wrap(statements: list[Any], make: Callable[[list[Any]], cst.BaseCompoundStatement]) -> cst.CSTNode:
    """Put `statements` under a new compound statement; comments above the first one go above it."""
    first = statements[0]
    statements = [first.with_changes(leading_lines=())] + statements[1:]
    return make(statements).with_changes(leading_lines=first.leading_lines)


def with_block(header: str, statements: list[Any]) -> cst.With:
    """`with <header>:` around `statements`."""
    template = cst.parse_statement(f"with {header}:\n    pass\n")
    assert isinstance(template, cst.With)
    return template.with_changes(body=cst.IndentedBlock(body=statements))


def append_elements(elements: list[Any], new: list[Any],
                    opening: cst.BaseParenthesizableWhitespace | None) -> list[Any]:
    """Append Arg/DictElement nodes in the layout of the existing ones (one line or one per line,
    trailing comma or not)."""
    if not elements:
        spaced = [e.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                  for e in new[:-1]]
        return spaced + [new[-1]]
    last = elements[-1]
    if len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma):
        separator = elements[-2].comma
    elif opening is not None and isinstance(opening, cst.ParenthesizedWhitespace):
        separator = cst.Comma(whitespace_after=opening)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing = last.comma if isinstance(last.comma, cst.Comma) else None
    closing = getattr(last, "whitespace_after_arg", None)
    if trailing is None and isinstance(closing, cst.ParenthesizedWhitespace):
        # `f(\n    a, b\n)`: the line break before `)` stays before `)`, after the new arguments
        last = last.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        new = [*new[:-1], new[-1].with_changes(whitespace_after_arg=closing)]
    result = list(elements[:-1]) + [last.with_changes(comma=separator)]
    for item in new[:-1]:
        result.append(item.with_changes(comma=separator))
    result.append(new[-1].with_changes(comma=trailing if trailing else cst.MaybeSentinel.DEFAULT))
    return result
