"""Memory and transfer analysis of training loops.

A training loop is the innermost `for`/`while` loop that contains a `.backward()` call. Inside
it the analyzer looks for host synchronisations, blocking host-to-device copies, tensors that
keep their autograd graph while they are accumulated across steps, optimizer steps without
gradient accumulation, and `empty_cache()` calls. Loss tensors are the receivers of
`.backward()` (also through `scaler.scale(loss)`); model outputs are names assigned from a call
of something named like a model (`model`, `net`, `self.model`, `forward`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from npu_migrate.analyze.findings import Located, finding, seen
from npu_migrate.analyze.model import FileScan
from npu_migrate.analyze.devices import HOST_FACTORIES, device_like
from npu_migrate.core.diagnostics import Severity

SYNC_METHODS = {"item": "`.item()`", "cpu": "`.cpu()`", "numpy": "`.numpy()`", "tolist": "`.tolist()`"}
DETACHING = frozenset({"item", "detach", "tolist", "numpy", "data"})


def training_loops(loops: list[ast.stmt], backward_calls: list[ast.Call]) -> list[ast.stmt]:
    """The innermost loop around each backward call, once each, in source order."""
    chosen: dict[int, ast.stmt] = {}
    for call in backward_calls:
        best = None
        for loop in loops:
            inside = loop.lineno <= call.lineno <= (loop.end_lineno or loop.lineno)
            if inside and (best is None or loop.lineno >= best.lineno):
                best = loop
        if best is not None:
            chosen[id(best)] = best
    return sorted(chosen.values(), key=lambda n: (n.lineno, n.col_offset))


ACCUMULATION_NAMES = re.compile(r"accum|acc_steps|grad_acc|update_freq|last_opt_step|sync_gradients|micro",
                                re.IGNORECASE)


class LoopAnalysis:
    def __init__(self, scan: FileScan, qualify: Callable[[ast.AST], str | None], lines: list[str]) -> None:
        self.scan = scan
        self.path = scan.path
        self.qualify = qualify
        self.lines = lines

    def seen(self, label: str, node: Located) -> str:
        return seen(label, self.lines, node.lineno)

    def run(self, loop: ast.stmt) -> None:
        self.scan.train_loops.append((loop.lineno, loop.col_offset + 1))
        self.loop_seen = self.seen("training loop", loop)
        backward = next(n for n in ast.walk(loop) if type(n) is ast.Call and type(n.func) is ast.Attribute
                        and n.func.attr == "backward")
        self.backward_seen = self.seen("backward", backward)
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(loop):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        self.parents = parents
        self.loop = loop
        losses, outputs = self._grad_names(loop)
        grad_names = losses | outputs
        reported: set[int] = set()
        steps: list[ast.Call] = []
        for node in ast.walk(loop):
            if isinstance(node, ast.Call):
                self._call(node, reported, steps)
            elif isinstance(node, ast.AugAssign) and type(node.op) is ast.Add and _bare(node.value, grad_names):
                self._leak(node, _name_of(node.value, grad_names), "accumulated with `+=`")
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and type(node.value.op) is ast.Add:
                target = node.targets[0]
                if (isinstance(target, ast.Name) and isinstance(node.value.left, ast.Name)
                        and node.value.left.id == target.id and _bare(node.value.right, grad_names)):
                    self._leak(node, _name_of(node.value.right, grad_names), "accumulated with `+`")
        self._appends(loop, grad_names)
        micro = _names_in(getattr(loop, "iter", None) or getattr(loop, "test", None))
        if any(ACCUMULATION_NAMES.search(name) for name in micro):
            self.scan.accumulation.append(self.seen("accumulation micro-step loop", loop))
        elif steps:
            guards = [guard for guard in map(self._accumulation_guard, steps) if guard is not None]
            optimizers = {ast.unparse(step.func.value) for step in steps}  # type: ignore[attr-defined]
            if len(optimizers) > 1:  # alternating updates (GAN D/G): accumulation is no drop-in change
                return
            if guards:
                self.scan.accumulation.append(self.seen("accumulation guard", guards[0]))
            else:
                step = steps[0]
                self.scan.findings.append(finding(
                    "ANA046", self.path, step,
                    "the optimizer steps on every iteration: to train a larger effective batch in NPU "
                    "memory, accumulate gradients over N steps (scale the loss by 1/N, step when "
                    "`i % N == 0`)",
                    evidence=[self.loop_seen, self.backward_seen, self.seen("optimizer step", step),
                              ("no accumulation guard (`if ... % N`, `if ni - last_opt_step >= accumulate`) "
                              "around the step, no micro-step loop")]))

    # -- pieces --------------------------------------------------------------------------------
    def _grad_names(self, loop: ast.AST) -> tuple[set[str], set[str]]:
        losses: set[str] = set()
        outputs: set[str] = set()
        for node in ast.walk(loop):
            if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "backward":
                receiver = node.func.value
                if type(receiver) is ast.Call and receiver.args:  # scaler.scale(loss).backward()
                    receiver = receiver.args[0]
                if type(receiver) is ast.Name:
                    losses.add(receiver.id)
            elif type(node) is ast.Assign and type(node.value) is ast.Call:
                callee = _callee_name(node.value.func).lower()
                if "model" in callee or "net" in callee or callee == "forward":
                    for target in node.targets:
                        for name in ast.walk(target):
                            if type(name) is ast.Name:
                                outputs.add(name.id)
        return losses, outputs

    def _call(self, node: ast.Call, reported: set[int], steps: list[ast.Call]) -> None:
        func = node.func
        if type(func) is not ast.Attribute:
            return
        attr = func.attr
        if attr in SYNC_METHODS and not node.args and id(node) not in reported:
            receiver = func.value  # `x.detach().cpu().numpy()` is one synchronisation
            while type(receiver) is ast.Call and type(receiver.func) is ast.Attribute:
                reported.add(id(receiver))
                receiver = receiver.func.value
            periodic = self._periodic(node)
            message = (f"{SYNC_METHODS[attr]} in the training loop waits for the NPU to finish "
                       "every queued operator")
            evidence = [self.loop_seen, self.seen("synchronising call", node)]
            if periodic:
                self.scan.findings.append(finding(
                    "ANA041", self.path, node, message + " (only every N steps here: acceptable for logging)",
                    severity=Severity.INFO, evidence=evidence + ["guarded by an `if ... % N` test"]))
            else:
                self.scan.findings.append(finding(
                    "ANA041", self.path, node,
                    message + ": keep values on the device and read them every N steps",
                    evidence=evidence + ["no `if ... % N` guard: runs every step"]))
        elif attr in ("cuda", "to") and _copies_to_device(node) and _is_model(func.value):
            self.scan.findings.append(finding(
                "ANA048", self.path, node,
                "the model is moved to the device on every step: its parameters are already there after "
                "the first step; move it once, before the loop",
                evidence=[self.loop_seen, self.seen("model transfer inside the loop", node)],
                confidence="medium"))
        elif attr in ("cuda", "to") and _copies_to_device(node) and not _non_blocking(node):
            receiver = func.value
            if type(receiver) is ast.Call and (self.qualify(receiver.func) or "") in HOST_FACTORIES:
                message = ("a tensor is built on the host and copied to the device on every step: "
                           "create it on the device (`device=`) or once, before the loop")
            else:
                message = ("blocking host-to-device copy on every step: use "
                           "`non_blocking=True` with `pin_memory=True` in the DataLoader")
            self.scan.findings.append(finding("ANA042", self.path, node, message,
                                              evidence=[self.loop_seen, self.seen("copy", node),
                                                        "no `non_blocking=True`"]))
        elif attr == "step" and _optimizer_step(node):
            steps.append(node)
        elif attr == "empty_cache":
            self.scan.findings.append(finding(
                "ANA047", self.path, node,
                "`empty_cache()` inside the training loop hides fragmentation at the cost of "
                "re-allocating every step: on NPU set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True "
                "and drop the call", evidence=[self.loop_seen, self.seen("empty_cache", node)]))

    def _appends(self, loop: ast.AST, grad_names: set[str]) -> None:
        for node in ast.walk(loop):
            if (type(node) is ast.Call and type(node.func) is ast.Attribute
                    and node.func.attr in ("append", "extend") and node.args
                    and _bare(node.args[0], grad_names)):
                self._leak(node, _name_of(node.args[0], grad_names), "appended to a list")

    def _leak(self, node: Located, name: str, how: str) -> None:
        self.scan.findings.append(finding(
            "ANA044", self.path, node,
            f"`{name}` keeps its autograd graph and is {how} on every step: the graphs of all steps "
            f"stay alive (memory grows each step); use `{name}.item()` or `{name}.detach()`",
            evidence=[self.loop_seen, self.backward_seen, self.seen(f"`{name}` {how}", node)]))

    def _accumulation_guard(self, step: ast.AST) -> ast.If | None:
        """The `if` between the step and the loop that makes it periodic: a `%` test or a test on
        an accumulation counter (`if ni - last_opt_step >= accumulate:`)."""
        current = self.parents.get(id(step))
        while current is not None and current is not self.loop:
            if type(current) is ast.If and self._counts_steps(current.test):
                return current
            current = self.parents.get(id(current))
        return None

    def _counts_steps(self, test: ast.AST, follow: bool = True) -> bool:
        """A `%` test or an accumulation counter, also through a flag set in the loop
        (`need_update = (i + 1) % accum_steps == 0` ... `if need_update:`)."""
        if any(type(n) is ast.BinOp and type(n.op) is ast.Mod for n in ast.walk(test)):
            return True
        names = _names_in(test)
        if any(ACCUMULATION_NAMES.search(name) for name in names):
            return True
        if follow:
            for node in ast.walk(self.loop):
                if type(node) is ast.Assign and any(type(t) is ast.Name and t.id in names for t in node.targets) \
                        and self._counts_steps(node.value, follow=False):
                    return True
        return False

    def _periodic(self, node: ast.AST) -> bool:
        """Whether an `if` with a `%` test between the node and the loop guards it."""
        current = self.parents.get(id(node))
        while current is not None and current is not self.loop:
            if type(current) is ast.If and any(type(n) is ast.BinOp and type(n.op) is ast.Mod
                                               for n in ast.walk(current.test)):
                return True
            current = self.parents.get(id(current))
        return False


def _is_model(node: ast.AST) -> bool:
    name = _callee_name(node).lower() if type(node) in (ast.Name, ast.Attribute) else ""
    return name.endswith(("model", "net")) and "input" not in name


def _optimizer_step(node: ast.Call) -> bool:
    """`optimizer.step()` or `scaler.step(optimizer)`; not a scheduler or profiler, not `step(closure)` (LBFGS)
    nor `step(context_id)` (distributed autograd), where accumulation does not apply."""
    receiver = _callee_name(node.func.value).lower()  # type: ignore[attr-defined]
    if "sched" in receiver or "prof" in receiver:  # LR schedulers and torch.profiler steps
        return False
    return not (node.args or node.keywords) or "scaler" in receiver


def _names_in(node: ast.AST | None) -> list[str]:
    if node is None:
        return []
    return [n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))]


def _callee_name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        value = func.value
        return func.attr if not isinstance(value, ast.Name) or value.id == "self" else value.id + "." + func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _bare(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` uses one of `names` with its autograd graph (not via .item()/.detach()...)."""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr not in DETACHING and _bare(func.value, names)
        return False
    if isinstance(node, ast.Attribute):
        return node.attr not in DETACHING and _bare(node.value, names)
    if isinstance(node, ast.Subscript):
        return _bare(node.value, names)
    if isinstance(node, ast.BinOp):
        return _bare(node.left, names) or _bare(node.right, names)
    if isinstance(node, ast.UnaryOp):
        return _bare(node.operand, names)
    return False


def _name_of(node: ast.AST, names: set[str]) -> str:
    for child in ast.walk(node):
        if type(child) is ast.Name and child.id in names:
            return child.id
    return "tensor"


def _copies_to_device(node: ast.Call) -> bool:
    if node.func.attr == "cuda":  # type: ignore[attr-defined]
        return True
    return device_like(node)


def _non_blocking(node: ast.Call) -> bool:
    return any(k.arg == "non_blocking" and not (type(k.value) is ast.Constant and k.value.value is False)
               for k in node.keywords)
