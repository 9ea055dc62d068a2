"""Device values that travel: where a CUDA device string built in one place ends up.

An `ast` pass per file (and two project facts, summarized per file and merged per package root)
follows a CUDA device literal (`"cuda:0"`, `f"cuda:{rank}"`, `"cuda:%d" % i`, `"cuda:" + str(i)`,
`"cuda:{}".format(g)`) from where it is written to where it is used:

- through local variables, parameter defaults (`def build(dev_name="cuda")`) and the arguments
  of calls of the file's own functions, positional or keyword (`load(p, location="cuda")`),
- attributes (`self.accel = "cuda"`, a dataclass/config field `accel: str = "cuda"`, read
  anywhere in the file as `<obj>.accel`), dict entries (`cfg = {"accel": "cuda"}` read as
  `cfg["accel"]` / `cfg.get("accel")`),
- function returns (`def pick(): return "cuda:0"` then `x.to(pick())`),
- derived strings (`f"{dev}:{rank}"`, `dev + ":0"`, `str(dev)`, `torch.device(dev)`),
- module constants across modules (the project fact `DEVICE_CONSTANTS`),
- keyword arguments of other modules' functions (`DEVICE_PARAMETERS`).

A use is a *device position* when it is an argument the device table calls a device
(`codemods/data/device_positions*.json`: `device=`, `map_location=`, `torch.device(x)`,
`x.to(x)`, ...). Print and logging calls neither count nor block. A literal whose every use is a
device position (at least one) is *proven*; one with some device uses and some others is
*probable*. Rules turn these into rewrites and reports (NPU500).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from codemods.api.facts import Project, ProjectFact, SourceFile, local_project
from codemods.api.facts import module_names as module_names  # where older callers import it from
from codemods.model.astnodes import call_name, qualified_name, tree_children
from codemods.model.facts import FileFacts

DEVICE_LITERAL = re.compile(r"cuda(:\d+)?|cuda:(%[-+ 0#]*\d*[dis]|%\(\w+\)[dis]|\{[^{}]*\})|cuda:")
_PLAIN = re.compile(r"cuda(:\d+)?")
_NEUTRAL_CALLS = frozenset({"print", "debug", "info", "warning", "warn", "error", "critical",
                            "exception", "log", "write", "echo", "secho"})
_OTHER_DEVICES = re.compile(r"cpu|mps|xpu|meta|npu(:\d+)?|cuda(:\d+)?")
# a module-level `NAME = "cuda[:N]"` (annotated or not) at the start of a line: only such files
# can export a device constant, so only they are parsed in the index's first pass
_CONSTANT_LINE = re.compile(rb"""^[A-Za-z_]\w*\s*(?::[^=\n]*)?=\s*['"]cuda(?::\d+)?['"]""", re.MULTILINE)
INDEX_OPTION = "device_index"  # the rule-options key of `DEVICE_CONSTANTS`
PARAMETER_INDEX_OPTION = "device_parameters"  # ... and the one of `DEVICE_PARAMETERS`
_MAX_DEPTH = 6


@dataclass(frozen=True)
class DevicePlaces:
    """The parts of the device table this analysis needs."""

    keywords: frozenset[str]
    functions: Mapping[str, tuple[frozenset[int], frozenset[str]]]
    methods: Mapping[str, frozenset[int]]


def literal_root(node: ast.expr) -> ast.Constant | None:
    """The CUDA string a device-valued expression is built on, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node if DEVICE_LITERAL.fullmatch(node.value) and node.value != "cuda:" else None
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and head.value in ("cuda", "cuda:"):
            rest = node.values[1:]
            if (head.value == "cuda" and not rest) or (len(rest) == 1 and isinstance(rest[0], ast.FormattedValue)):
                return head
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
        if isinstance(node.op, ast.Mod) and node.left.value.startswith("cuda:") and \
                DEVICE_LITERAL.fullmatch(node.left.value):
            return node.left
        if isinstance(node.op, ast.Add) and node.left.value == "cuda:":
            return node.left
        return None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
            and re.fullmatch(r"cuda:\{[^{}]*\}", node.func.value.value)):
        return node.func.value
    return None


@dataclass
class Verdict:
    """What the uses of one CUDA literal say. `device` and `other` hold evidence lines."""

    device: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        return bool(self.device) and not self.other

    @property
    def probable(self) -> bool:
        return bool(self.device) and bool(self.other)


@dataclass(frozen=True)
class Finding:
    """A literal to rewrite (`proven`) or report, with the evidence path in words."""

    line: int
    col: int  # 1-based column of the expression built on the literal
    value: str  # the literal's text value ("cuda:0", "cuda:%d", "cuda:")
    proven: bool
    evidence: str



class FileFlow:
    """One file's device-value flow; `findings()` lists the literals that reach a device."""

    def __init__(self, tree: ast.Module, facts: FileFacts, places: DevicePlaces,
                 module_uses: Mapping[str, Mapping[str, Any]] | None = None,
                 device_names: Iterable[str] = (),
                 parameters: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> None:
        self.tree = tree
        self.aliases = facts.aliases
        self.constants = facts.constants
        self.places = places
        self.module_uses = module_uses or {}  # NAME -> {"device": [...], "other": [...]} from other modules
        # "module.function" -> parameter -> {"device": [...], "other": [...]}: where the parameters
        # of other modules' functions go (`DEVICE_PARAMETERS`)
        self.parameters = parameters or {}
        self.device_names = frozenset(device_names)
        self.parents: dict[int, ast.AST] = {}
        self.scope_of: dict[int, ast.AST] = {}  # id(node) -> innermost function (or the module)
        self.locals: dict[int, set[str]] = {}  # id(function) -> names it binds
        self.loads: dict[tuple[int, str], list[ast.Name]] = {}
        self.attr_loads: dict[str, list[ast.expr]] = {}  # attribute/dict key -> loads
        self.calls: dict[str, list[ast.Call]] = {}  # local function name -> calls of it
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.literals: list[ast.expr] = []  # string constants and templates, in walk order
        self._index()

    # -- indexing ---------------------------------------------------------------------------
    def _index(self) -> None:
        """One depth-first walk (last child first: the order every list below keeps). Names and
        constants are leaves and are not walked into; contexts and operators (singletons) are
        not children: none of the maps below is ever asked about them."""
        parents, scope_of, literals = self.parents, self.scope_of, self.literals
        self.locals[id(self.tree)] = set()
        stack: list[tuple[ast.AST, ast.AST]] = [(self.tree, self.tree)]
        while stack:
            node, scope = stack.pop()
            for child in tree_children(node):
                parents[id(child)] = node
                scope_of[id(child)] = scope
                if isinstance(child, ast.Name):
                    if isinstance(child.ctx, ast.Load):
                        self.loads.setdefault((id(scope), child.id), []).append(child)
                    else:
                        self.locals[id(scope)].add(child.id)
                    continue
                if isinstance(child, ast.Constant):
                    literals.append(child)
                    continue
                if isinstance(child, _FUNCTIONS):
                    self._bind_function(child, scope)
                    stack.append((child, child))
                    continue
                if isinstance(child, ast.Attribute):
                    if isinstance(child.ctx, ast.Load):
                        self.attr_loads.setdefault(child.attr, []).append(child)
                elif isinstance(child, ast.Subscript):
                    self._index_subscript(child)
                elif isinstance(child, ast.Call):
                    self._index_call(child)
                elif isinstance(child, ast.JoinedStr):
                    literals.append(child)
                stack.append((child, scope))

    def _bind_function(self, function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: ast.AST) -> None:
        names = self.locals.setdefault(id(function), set())
        arguments = function.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                    arguments.vararg, arguments.kwarg]:
            if arg is not None:
                names.add(arg.arg)
        if not isinstance(function, ast.Lambda):
            self.locals[id(scope)].add(function.name)
            if scope is self.tree:
                self.functions[function.name] = function

    def _index_subscript(self, node: ast.Subscript) -> None:
        key = node.slice
        if isinstance(node.ctx, ast.Load) and isinstance(key, ast.Constant) and isinstance(key.value, str):
            self.attr_loads.setdefault(key.value, []).append(node)

    def _index_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            self.calls.setdefault(func.id, []).append(node)
        elif (isinstance(func, ast.Attribute) and func.attr == "get" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            self.attr_loads.setdefault(node.args[0].value, []).append(node)

    def _name_loads(self, scope: ast.AST, name: str) -> list[ast.Name]:
        """Loads of `name` that see the binding of `scope` (nested functions that do not bind
        it themselves see it too)."""
        found = list(self.loads.get((id(scope), name), []))
        for (scope_id, loaded), nodes in self.loads.items():
            if loaded != name or scope_id == id(scope):
                continue
            for node in nodes:
                owner = self.scope_of.get(id(node))
                while owner is not None and owner is not scope and name not in self.locals.get(id(owner), ()):
                    owner = self.scope_of.get(id(owner))
                if owner is scope:
                    found.append(node)
        return found

    # -- classifying one use ----------------------------------------------------------------------
    def classify(self, node: ast.expr, verdict: Verdict, depth: int, seen: set[int]) -> None:
        """Follow the value of `node` up through the expressions that carry it."""
        if depth > _MAX_DEPTH or id(node) in seen:
            return
        seen.add(id(node))
        parent = self.parents.get(id(node))
        line = getattr(node, "lineno", 0)
        if isinstance(parent, ast.FormattedValue):
            joined = self.parents.get(id(parent))
            if isinstance(joined, ast.JoinedStr) and joined.values and joined.values[0] is parent:
                return self.classify(joined, verdict, depth, seen)
            return self._text_or(joined, verdict, line, "formatted into a string")
        if isinstance(parent, ast.BinOp) and parent.left is node and isinstance(parent.op, (ast.Add, ast.Mod)):
            return self.classify(parent, verdict, depth, seen)
        if isinstance(parent, ast.IfExp) and node is not parent.test:
            return self.classify(parent, verdict, depth, seen)
        if isinstance(parent, ast.expr) and self._in_collection(node, parent):
            # `['cuda:' + str(i) for i in range(n)]`, `("cuda:0", "cuda:1")`: the collection carries
            # the value to where an element is taken out (`devices[0]`, `for d in devices`)
            return self.classify(parent, verdict, depth, seen)
        if isinstance(parent, ast.Subscript) and node is parent.value and isinstance(parent.ctx, ast.Load) \
                and not isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp)):
            return self.classify(parent, verdict, depth + 1, seen)
        if isinstance(parent, ast.For) and node is parent.iter and not isinstance(node, (ast.Constant, ast.BinOp)):
            return self.follow_target(parent.target, verdict, depth + 1, seen)
        if isinstance(parent, ast.Call) and node in parent.args:
            return self._argument(parent, parent.args.index(node), None, verdict, depth, seen, line)
        if isinstance(parent, ast.keyword):
            call = self.parents.get(id(parent))
            if isinstance(call, ast.Call):
                return self._argument(call, -1, parent.arg, verdict, depth, seen, line)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and node is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            for target in targets:
                self.follow_target(target, verdict, depth + 1, seen)
            return None
        if isinstance(parent, ast.Return):
            function = self.scope_of.get(id(parent))
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = self.calls.get(function.name, [])
                if not calls:
                    verdict.other.append(f"returned by `{function.name}()` (line {line}), called nowhere in this file")
                for call in calls:
                    self.classify(call, verdict, depth + 1, seen)
            return None
        if isinstance(parent, ast.Compare):
            others = [o for o in [parent.left, *parent.comparators] if o is not node]
            if all(isinstance(o, ast.Constant) and isinstance(o.value, str) and _OTHER_DEVICES.fullmatch(o.value)
                   for o in others):
                verdict.device.append(f"compared with a device string (line {line})")
            else:
                verdict.other.append(f"compared (line {line})")
            return None
        if isinstance(parent, ast.arguments):
            function = self.parents.get(id(parent))
            name = _parameter_of(parent, node)
            if name is not None and function is not None:
                return self._follow_name(function, name, verdict, depth + 1, seen)
        if isinstance(parent, ast.Dict) and node in parent.values:
            holder = self.parents.get(id(parent))
            if isinstance(holder, ast.keyword) and holder.arg in self.places.keywords:
                # `device_map={"": dev}`, `map_location={"cuda:1": dev}`: the values are devices
                verdict.device.append(f"a value of `{holder.arg}=` (line {line})")
                return None
            key = parent.keys[parent.values.index(node)]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return self._follow_key(key.value, verdict, depth + 1, seen, f"entry {key.value!r} (line {line})")
        what = type(parent).__name__ if parent is not None else "module"
        verdict.other.append(f"used as {what} (line {line})")
        return None

    @staticmethod
    def _in_collection(node: ast.expr, parent: ast.AST | None) -> bool:
        """Whether `node` is an element of a list/tuple/set display or comprehension."""
        if isinstance(parent, (ast.List, ast.Tuple, ast.Set)) and isinstance(getattr(parent, "ctx", ast.Load()), ast.Load):
            return node in parent.elts
        return isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) and node is parent.elt

    def _text_or(self, node: ast.AST | None, verdict: Verdict, line: int, what: str) -> None:
        call = node
        while call is not None and not isinstance(call, (ast.Call, ast.stmt)):
            call = self.parents.get(id(call))
        if isinstance(call, ast.Call) and call_name(call.func) in _NEUTRAL_CALLS:
            return
        verdict.other.append(f"{what} (line {line})")

    def _argument(self, call: ast.Call, index: int, keyword: str | None, verdict: Verdict,
                  depth: int, seen: set[int], line: int) -> None:
        func = call.func
        name = call_name(func)
        if name in _NEUTRAL_CALLS:
            return
        qualified = qualified_name(func, self.aliases)
        label = qualified or name or "a call"
        if keyword is not None:
            spec = self.places.functions.get(qualified or "")
            if keyword in self.places.keywords or (spec and keyword in spec[1]):
                verdict.device.append(f"`{keyword}=` of `{label}()` (line {line})")
                return
            if keyword in self.device_names:
                verdict.device.append(f"`{keyword}=` (line {line})")
                return
            if isinstance(func, ast.Name) and func.id in self.functions:
                self._into_keyword(self.functions[func.id], keyword, verdict, depth, seen, line)
                return
            uses = self.parameters.get(qualified or "", {}).get(keyword)
            if uses is not None:  # a parameter of another module's function
                verdict.device += list(uses.get("device", ()))
                verdict.other += list(uses.get("other", ()))
                return
            verdict.other.append(f"`{keyword}=` of `{label}()` (line {line})")
            return
        spec = self.places.functions.get(qualified or "")
        if spec and index in spec[0]:
            verdict.device.append(f"argument of `{label}()` (line {line})")
            return
        if qualified is None and isinstance(func, ast.Attribute) and index in self.places.methods.get(func.attr, ()):
            verdict.device.append(f"argument of `.{func.attr}()` (line {line})")
            return
        if name == "str" and qualified is None:
            return self.classify(call, verdict, depth, seen)
        if isinstance(func, ast.Name) and func.id in self.functions:
            self._into_parameter(self.functions[func.id], index, verdict, depth, seen, line)
            return
        verdict.other.append(f"argument {index + 1} of `{label}()` (line {line})")

    def _into_keyword(self, function: ast.FunctionDef | ast.AsyncFunctionDef, keyword: str,
                      verdict: Verdict, depth: int, seen: set[int], line: int) -> None:
        """`load(p, location="cuda")` of a function of this file: where its `location` goes."""
        arguments = function.args
        if keyword not in {a.arg for a in [*arguments.args, *arguments.kwonlyargs]}:
            verdict.other.append(f"`{keyword}=` of `{function.name}()` (line {line})")
            return
        self._follow_name(function, keyword, verdict, depth + 1, seen)

    def parameter_uses(self, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> Verdict:
        """Where the parameter `name` of one of this file's functions goes."""
        verdict = Verdict()
        self._follow_name(function, name, verdict, 1, set())
        return verdict

    def _into_parameter(self, function: ast.FunctionDef | ast.AsyncFunctionDef, index: int,
                        verdict: Verdict, depth: int, seen: set[int], line: int) -> None:
        positional = [*function.args.posonlyargs, *function.args.args]
        if index >= len(positional):
            verdict.other.append(f"passed to `{function.name}()` (line {line})")
            return
        self._follow_name(function, positional[index].arg, verdict, depth + 1, seen)

    def follow_target(self, target: ast.expr, verdict: Verdict, depth: int, seen: set[int]) -> None:
        if isinstance(target, ast.Name):
            scope = self.scope_of.get(id(target), self.tree)
            if isinstance(self.parents.get(id(self.parents.get(id(target)))), ast.ClassDef):
                self._follow_key(target.id, verdict, depth, seen, f"class field `{target.id}`")
                return
            self._follow_name(scope, target.id, verdict, depth, seen)
        elif isinstance(target, ast.Attribute):
            self._follow_key(target.attr, verdict, depth, seen, f"attribute `.{target.attr}`")
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
                and isinstance(target.slice.value, str):
            self._follow_key(target.slice.value, verdict, depth, seen, f"entry {target.slice.value!r}")
        else:
            verdict.other.append(f"unpacked (line {getattr(target, 'lineno', 0)})")

    def _follow_name(self, scope: ast.AST, name: str, verdict: Verdict, depth: int, seen: set[int]) -> None:
        if scope is self.tree and name in self.module_uses:
            uses = self.module_uses[name]
            verdict.device += list(uses.get("device", ()))
            verdict.other += list(uses.get("other", ()))
        loads = self._name_loads(scope, name)
        if not loads and scope is not self.tree and not (scope is self.tree and name in self.module_uses):
            verdict.other.append(f"`{name}` is never read")
        for load in loads:
            self.classify(load, verdict, depth, seen)

    def _follow_key(self, key: str, verdict: Verdict, depth: int, seen: set[int], what: str) -> None:
        loads = self.attr_loads.get(key, [])
        if not loads:
            verdict.other.append(f"{what} is never read in this file")
        for load in loads:
            self.classify(load, verdict, depth, seen)

    # -- results ---------------------------------------------------------------------------------
    def findings(self, skip: Callable[[ast.expr], bool] | None = None) -> list[Finding]:
        """Every CUDA literal whose value reaches a device position somewhere. Literals already
        in a device position (NPU103 rewrites those) and values `skip` says yes to are left out."""
        found = []
        for literal in self.literals:
            # the value is the literal, or the `%` / `+` / `.format(...)` built on it
            node: ast.AST = literal
            parent = self.parents.get(id(literal))
            if isinstance(parent, ast.BinOp) and parent.left is literal:
                node = parent
            elif isinstance(parent, ast.Attribute) and isinstance(self.parents.get(id(parent)), ast.Call):
                node = self.parents[id(parent)]
            root = literal_root(node) if isinstance(node, ast.expr) else None
            if root is None or not isinstance(node, ast.expr) or (skip is not None and skip(node)):
                continue
            parent = self.parents.get(id(node))
            if isinstance(parent, (ast.BinOp, ast.JoinedStr, ast.Call)) and literal_root(parent) is not None:
                continue  # the bigger expression is the value
            if isinstance(parent, ast.Attribute):
                continue  # "cuda:{}".format: its Call is the value
            verdict = Verdict()
            self.classify(node, verdict, 0, set())
            if not verdict.device:
                continue
            if self._direct_device(node) or self._module_constant(node):
                continue  # NPU103's and NPU190's own
            first = verdict.device[0]
            if verdict.proven:
                evidence = f"reaches {first}" + (f" and {len(verdict.device) - 1} more device use(s)"
                                                  if len(verdict.device) > 1 else "")
            else:
                evidence = f"reaches {first}, but is also {verdict.other[0]}"
            found.append(Finding(node.lineno, node.col_offset + 1, str(root.value), verdict.proven, evidence))
        return found

    def _module_constant(self, node: ast.expr) -> bool:
        """`NAME = "cuda"` at module level, assigned once: NPU190 decides, except for a
        constant only other modules read (the project index)."""
        parent = self.parents.get(id(node))
        if not (isinstance(parent, ast.Assign) and self.parents.get(id(parent)) is self.tree
                and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
            return False
        name = parent.targets[0].id
        return name in self.constants and name not in self.module_uses

    def _device_choice(self, node: ast.IfExp) -> bool:
        """NPU103's `"cuda" if <compares with "cuda"> else "cpu"`."""
        branches = (node.body, node.orelse)
        if not all(isinstance(b, ast.Constant) and isinstance(b.value, str) for b in branches):
            return False
        compares = [n for n in ast.walk(node.test) if isinstance(n, ast.Compare)]
        return any(_cuda_constant(o) for c in compares for o in [c.left, *c.comparators])

    def _direct_device(self, node: ast.expr) -> bool:
        """Whether the literal itself sits in a position NPU103 rewrites (a device keyword or
        argument, the value of a device-named target inside a function or class, a device-named
        parameter's default, a device-keyed dict entry, a branch chosen by `is_available()`)."""
        parent = self.parents.get(id(node))
        names = self.device_names
        if isinstance(parent, ast.IfExp):
            return ("is_available" in ast.dump(parent.test) or self._device_choice(parent)
                    or self._direct_device(parent))
        if isinstance(parent, ast.Compare):  # NPU104: `device == "cuda"`, `"cuda" in device`
            return any(_spelled(o).lower() in names or (isinstance(o, ast.Attribute) and o.attr == "type")
                       for o in [parent.left, *parent.comparators] if o is not node)
        if isinstance(parent, ast.keyword):
            call = self.parents.get(id(parent))
            spec = self.places.functions.get(qualified_name(call.func, self.aliases) or "") \
                if isinstance(call, ast.Call) else None
            return parent.arg in self.places.keywords or bool(spec and parent.arg in spec[1])
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and (
                self.scope_of.get(id(parent)) is not self.tree
                or isinstance(self.parents.get(id(parent)), ast.ClassDef)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if all(_spelled(t).lower() in names for t in targets):
                return True
        if isinstance(parent, ast.arguments) and (_parameter_of(parent, node) or "").lower() in names:
            return True
        if isinstance(parent, ast.Dict) and node in parent.values:
            key = parent.keys[parent.values.index(node)]
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and (
                    key.value in self.places.keywords or key.value.lower() in names):
                return True
        if isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func
            spec = self.places.functions.get(qualified_name(func, self.aliases) or "")
            index = parent.args.index(node)
            if spec and index in spec[0]:
                return True
            if isinstance(func, ast.Attribute) and index in self.places.methods.get(func.attr, ()):
                return True
        return False


def _cuda_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_PLAIN.fullmatch(node.value))


def _parameter_of(arguments: ast.arguments, default: ast.expr) -> str | None:
    positional = [*arguments.posonlyargs, *arguments.args]
    for arg, value in zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults):
        if value is default:
            return arg.arg
    for arg, keyword_default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        if keyword_default is default:
            return arg.arg
    return None


def _spelled(target: ast.expr) -> str:
    if isinstance(target, ast.Name):
        return target.id
    return target.attr if isinstance(target, ast.Attribute) else ""


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


# -- the project facts: module constants and function parameters used across modules -----------

class DeviceConstants(ProjectFact):
    """NPU500's index of module constants read by other modules of the package root:
    `{abspath of defining file: {CONSTANT: {"device": [...], "other": [...]}}}` for module
    constants holding a CUDA device string (evidence lines name the using file).

    A file's summary is the device constants it defines (only files with a module-level
    `NAME = "cuda..."` line are parsed); the merge then asks the files that mention one of those
    names how they use the constants they import (`constant_uses`)."""

    key = INDEX_OPTION

    def summarize(self, source: SourceFile) -> list[str] | None:
        if not _CONSTANT_LINE.search(source.data) or source.tree is None:
            return None
        constants = FileFacts.from_tree(source.tree).constants
        names = [name for name, value in constants.items() if isinstance(value, str) and _PLAIN.fullmatch(value)]
        return names or None

    def merge(self, project: Project) -> dict[str, dict[str, Any]]:
        exported: dict[str, tuple[str, str]] = {}  # "module.NAME" -> (abspath, NAME)
        ambiguous: set[str] = set()
        for path, names in project.summaries(self):
            for name in names:
                for module in project.module_names(path):
                    key = f"{module}.{name}"
                    if key in exported and exported[key][0] != path:
                        ambiguous.add(key)
                    exported[key] = (path, name)
        for key in ambiguous:
            exported.pop(key, None)
        if not exported:
            return {}
        keys = sorted(exported)
        index: dict[str, dict[str, Any]] = {}
        for path in project.files():
            where = project.relative(path)
            for key, imported, device, other in project.analyse(path, constant_uses, keys) or ():
                defining, name = exported[key]
                if imported and defining == path:
                    continue
                entry = index.setdefault(defining, {}).setdefault(name, {"device": [], "other": []})
                entry["device"] += [f"{where}: {e}" for e in device]
                entry["other"] += [f"{where}: {e}" for e in other]
        return index

    def slice(self, index: Any, path: str) -> Any:
        return index.get(os.path.abspath(path))


def constant_uses(source: SourceFile, keys: Sequence[str]) -> list[list[Any]]:
    """How a file uses the module constants `keys` ("module.NAME") it imports: for each use,
    `[key, imported by name, device evidence, other evidence]` (`from m import NAME` first, then
    `m.NAME` through an imported module). Only a file mentioning one of the names is parsed."""
    names = sorted({key.rsplit(".", 1)[1] for key in keys})
    pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")\b")
    if not pattern.search(source.data) or source.tree is None:
        return []
    tree = source.tree
    exported = set(keys)
    facts = FileFacts.from_tree(tree)
    imported = {local: target for local, target in facts.aliases.items() if target in exported}
    modules = {local: target for local, target in facts.aliases.items()
               if any(key.startswith(target + ".") for key in exported)}
    if not imported and not modules:
        return []
    flow = FileFlow(tree, facts, device_places())
    found: list[list[Any]] = []
    for local, target in imported.items():
        verdict = Verdict()
        for load in flow.loads.get((id(tree), local), []) + _nested_loads(flow, local):
            flow.classify(load, verdict, 0, set())
        found.append([target, True, verdict.device, verdict.other])
    for module in modules.values():
        for attribute_loads in flow.attr_loads.values():
            for attribute_load in attribute_loads:
                used = qualified_name(attribute_load, facts.aliases) \
                    if isinstance(attribute_load, ast.Attribute) else None
                if used is None or used not in exported or not used.startswith(module + "."):
                    continue
                verdict = Verdict()
                flow.classify(attribute_load, verdict, 0, set())
                found.append([used, False, verdict.device, verdict.other])
    return found


# a CUDA literal passed by keyword (`load_state_dict(path, location='cuda')`): only files with one
# are parsed for the parameter index; the literal is found first (a pattern that starts with `\w`
# would be tried at every position of every file), then the keyword before it
_CUDA_LITERAL = re.compile(rb"""['"]cuda(?::\d+)?['"]""")
_KEYWORD_BEFORE = re.compile(rb"(\w+)\s*=\s*$")


def _literal_keywords(data: bytes) -> set[str]:
    """The keywords a CUDA literal is passed by in `data` (`location` of `location='cuda'`)."""
    found = set()
    for match in _CUDA_LITERAL.finditer(data):
        before = _KEYWORD_BEFORE.search(data, max(0, match.start() - 64), match.start())
        if before is not None and data[before.start() - 1:before.start()] not in (b".",):
            found.add(before.group(1).decode("ascii", "replace"))
    return found


class DeviceParameters(ProjectFact):
    """NPU500's index of the parameters of module-level functions that other modules of the
    package root call with a CUDA device literal by keyword (ControlNet's
    `load_state_dict(path, location='cuda')`, defined in `cldm/model.py` as
    `torch.load(path, map_location=torch.device(location))`):
    `{"module.function": {parameter: {"device": [...], "other": [...]}}}`, where that parameter
    goes in the function, so the caller's literal is a device value when every use is.

    A file's summary is the calls it makes with such a keyword literal (only files with one are
    parsed); the merge asks the files defining the called functions about their parameters."""

    key = PARAMETER_INDEX_OPTION

    def summarize(self, source: SourceFile) -> list[list[str]] | None:
        literal = _literal_keywords(source.data) if b"cuda" in source.data else set()
        if not literal:
            return None
        source.need_tree()  # the device table is read with the tree (a run caches the answer)
        # a literal passed as `device=` / `map_location=` ... is a device position wherever it
        # goes (NPU103 rewrites it at the call): only other keywords need the callee's parameter
        keywords = device_places().keywords
        if not literal - keywords or source.tree is None:
            return None
        aliases = FileFacts.from_tree(source.tree).aliases
        calls = []
        for node in ast.walk(source.tree):
            if not isinstance(node, ast.Call):
                continue
            qualified = qualified_name(node.func, aliases)
            if qualified is None:
                continue
            for argument in node.keywords:
                value = argument.value
                if argument.arg and argument.arg not in keywords and isinstance(value, ast.Constant) \
                        and isinstance(value.value, str) and _PLAIN.fullmatch(value.value):
                    calls.append([qualified, argument.arg])
        return calls or None

    def merge(self, project: Project) -> dict[str, dict[str, dict[str, Any]]]:
        by_module = project.modules()
        wanted: dict[str, set[str]] = {}  # "module.function" -> keywords passed a CUDA literal
        for _, calls in project.summaries(self):
            for qualified, keyword in calls:
                if len(by_module.get(qualified.rpartition(".")[0], ())) == 1:
                    wanted.setdefault(qualified, set()).add(keyword)
        index: dict[str, dict[str, dict[str, Any]]] = {}
        for qualified, keywords in sorted(wanted.items()):
            module, _, name = qualified.rpartition(".")
            (path,) = by_module[module]
            where = project.relative(path)
            for keyword, (device, other) in (project.analyse(path, parameter_uses, name, sorted(keywords)) or {}).items():
                index.setdefault(qualified, {})[keyword] = {
                    "device": [f"{where}: `{keyword}` of `{name}()` {e}" for e in device],
                    "other": [f"{where}: `{keyword}` of `{name}()` {e}" for e in other]}
        return index


def parameter_uses(source: SourceFile, name: str, keywords: Sequence[str]) -> dict[str, list[list[str]]] | None:
    """Where the parameters `keywords` of the module-level function `name` go:
    `{parameter: [device evidence, other evidence]}`; None without such a function."""
    if source.tree is None:
        return None
    flow = FileFlow(source.tree, FileFacts.from_tree(source.tree), device_places())
    function = flow.functions.get(name)
    if function is None:
        return None
    arguments = function.args
    found = {}
    for keyword in sorted(set(keywords) & {a.arg for a in [*arguments.args, *arguments.kwonlyargs]}):
        verdict = flow.parameter_uses(function, keyword)
        found[keyword] = [verdict.device, verdict.other]
    return found


DEVICE_CONSTANTS = DeviceConstants()
DEVICE_PARAMETERS = DeviceParameters()


def project_device_index(paths: Iterable[str], root: str,
                         places: DevicePlaces | None = None) -> dict[str, dict[str, Any]]:
    """`DEVICE_CONSTANTS` of the files `paths` as one package root at `root`, nothing cached
    (the fact reads the device table itself; `places` is accepted for older callers)."""
    return DEVICE_CONSTANTS.merge(local_project([DEVICE_CONSTANTS], paths, root))


def project_parameter_index(paths: Iterable[str], root: str,
                            places: DevicePlaces | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """`DEVICE_PARAMETERS` of the files `paths` as one package root at `root`, nothing cached."""
    return DEVICE_PARAMETERS.merge(local_project([DEVICE_PARAMETERS], paths, root))


def _nested_loads(flow: FileFlow, name: str) -> list[ast.Name]:
    return [n for (scope, loaded), nodes in flow.loads.items() if loaded == name and scope != id(flow.tree)
            for n in nodes if name not in flow.locals.get(scope, ())]


@cache
def device_places() -> DevicePlaces:
    """The device table's positions (`codemods/data/device_positions*.json`) for the flow."""
    from codemods.analyses.devices import device_positions  # LibCST: only when a flow runs

    table = device_positions()
    return DevicePlaces(table.keywords, table.functions, table.methods)
