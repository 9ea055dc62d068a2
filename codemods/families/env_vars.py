"""NPU201-NPU207: environment variables in Python code, and launch commands in Python strings.

Where a CUDA/NCCL variable name appears as a literal in a place that names a variable --
`os.environ[...]`, `.get/.setdefault/.pop`, `os.getenv/putenv/unsetenv`, `monkeypatch.setenv`,
`"NAME" in os.environ`, a dict literal key (`env={...}` for subprocess), `dict(NAME=...)` /
`.update(NAME=...)` -- it is mapped by `envmap` (fact sheet §3). A string that is only
mentioned (a log message, a help text) is left alone. Commands given to subprocess / os.system
(directly, or through a variable holding a literal) are rewritten like shell scripts.
"""

from __future__ import annotations

import ast
import re
from typing import ClassVar

import libcst as cst

from codemods.analyses import envmap
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.model.astnodes import ast_dotted_parts
from codemods.model.cstnodes import dotted_parts, verbatim_string, with_string
from npu_migrate.core.diagnostics import Severity

_GETTERS = {"get", "pop", "getenv", "unsetenv", "delenv"}


_SETTERS = {"setdefault", "putenv", "setenv"}


_MAPPINGS = {"update", "dict"}  # `.update(NAME=...)`, `dict(os.environ, NAME=...)`


COMMAND_FUNCS = {
    "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
    "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.system",
    "os.popen", "asyncio.create_subprocess_shell",
}


PLACEHOLDER = "${__npu_migrate_%d__}"


_PLACEHOLDER_RE = re.compile(r"\$\{__npu_migrate_\d+__\}")


def _safe_text(node: cst.SimpleString, text: str) -> bool:
    return node.quote not in text and "\\" not in text and (len(node.quote) == 3 or "\n" not in text)


def fstring_template(node: cst.FormattedString) -> str | None:
    """An f-string's text with each `{expression}` replaced by a numbered placeholder
    (`PLACEHOLDER % index`), for the shell-word rewriters; None where an escape makes the text
    differ from the value."""
    texts = []
    for index, part in enumerate(node.parts):
        if isinstance(part, cst.FormattedStringText):
            if "\\" in part.value:
                return None
            texts.append(part.value)
        else:
            texts.append(PLACEHOLDER % index)
    return "".join(texts)


class EnvVarRule(Rule):
    """Shared machinery; each subclass handles the envmap kinds of its code."""

    kinds: ClassVar[frozenset[str]] = frozenset()
    fix = Fix.SAFE

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._command_names: set[str] | None = None

    # -- occurrences of a variable name ----------------------------------------------------
    def _value(self, node: cst.CSTNode | None) -> tuple[str | None, bool]:
        """(literal value or None, whether it can be rewritten in place)."""
        if node is None:
            return None, False
        text = verbatim_string(node)
        if text is not None:
            return text, True
        if isinstance(node, cst.Name):
            constant = self.context.facts.constants.get(node.value)
            if isinstance(constant, str):
                return constant, False
        return None, False

    def _occurrence(self, original_key: cst.CSTNode, key: cst.SimpleString, value: cst.BaseExpression | None,
                    write: bool) -> tuple[cst.SimpleString, cst.SimpleString | None]:
        """(the key, renamed or not; the value's new literal, or None where the value stays)."""
        name = verbatim_string(key)
        if name is None:
            return key, None
        literal, rewritable = self._value(value)
        found = envmap.plan(name, literal, write=write)
        if found is None or found.kind not in self.kinds:
            return key, None
        for problem in found.problems:
            self.report(original_key, problem.message, severity=problem.severity)
        if found.new_value is not None and not rewritable:
            if found.kind == "bytes_to_mb":  # never give a MB variable a byte count
                self.report(original_key, f"`{name}` gets its value from a constant: set "
                            f"`{found.new_name}={found.new_value}` (MB) instead", Severity.WARNING)
                return key, None
            found.new_value = None
        if found.new_name:
            key = with_string(key, found.new_name)
        new_value = None
        if found.new_value is not None and isinstance(value, cst.SimpleString) and _safe_text(value, found.new_value):
            new_value = with_string(value, found.new_value)
        if found.new_name or found.new_value is not None:
            self.fixed(original_key, found.message)
        return key, new_value

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                self.tree.nodes("write_targets").add(target.target)

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        key, original_key = subscript_key(updated_node), subscript_key(original_node)
        if key is None or original_key is None or original_node in self.tree.nodes("write_targets"):
            return updated_node
        new_key, _ = self._occurrence(original_key, key, None, write=False)
        return _with_subscript_key(updated_node, new_key) if new_key is not key else updated_node

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        value = updated_node.value
        targets = list(updated_node.targets)
        for index, (orig_target, target) in enumerate(zip(original_node.targets, targets)):
            if (orig_target.target in self.tree.nodes("write_targets") and isinstance(target.target, cst.Subscript)
                    and isinstance(orig_target.target, cst.Subscript)):
                key, original_key = subscript_key(target.target), subscript_key(orig_target.target)
                if key is not None and original_key is not None:
                    new_key, new_value = self._occurrence(original_key, key, value, write=True)
                    value = new_value or value
                    targets[index] = target.with_changes(target=_with_subscript_key(target.target, new_key))
        if isinstance(original_node.value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString,
                                            cst.BinaryOperation, cst.List, cst.Tuple)):
            names = [t.target.value for t in original_node.targets if isinstance(t.target, cst.Name)]
            if any(name in self._commands() for name in names):
                value = self._command(original_node.value, value)
        if value is updated_node.value and all(a is b for a, b in zip(targets, updated_node.targets)):
            return updated_node
        return updated_node.with_changes(targets=targets, value=value)

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        elements = list(updated_node.elements)
        changed = False
        for index, (orig, element) in enumerate(zip(original_node.elements, elements)):
            if (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                    and isinstance(orig, cst.DictElement)):
                key, value = self._occurrence(orig.key, element.key, element.value, write=True)
                if key is not element.key or value is not None:
                    elements[index] = element.with_changes(key=key, value=value or element.value)
                    changed = True
        return updated_node.with_changes(elements=elements) if changed else updated_node

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> cst.Comparison:
        if (isinstance(updated_node.left, cst.SimpleString) and updated_node.comparisons
                and isinstance(updated_node.comparisons[0].operator, (cst.In, cst.NotIn))):
            key, _ = self._occurrence(original_node.left, updated_node.left, None, write=False)
            if key is not updated_node.left:
                return updated_node.with_changes(left=key)
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        method = _callee_name(updated_node.func)
        args = list(updated_node.args)
        if method in _GETTERS | _SETTERS and args and args[0].keyword is None and isinstance(args[0].value, cst.SimpleString):
            value = args[1].value if method in _SETTERS and len(args) > 1 else None
            key, new_value = self._occurrence(original_node.args[0].value, args[0].value, value,
                                              write=method in _SETTERS)
            if key is not args[0].value:
                args[0] = args[0].with_changes(value=key)
            if new_value is not None:
                args[1] = args[1].with_changes(value=new_value)
        elif method in _MAPPINGS:
            for index, (orig, arg) in enumerate(zip(original_node.args, args)):
                if arg.keyword is not None:
                    args[index] = self._keyword(orig, arg)
        parts = dotted_parts(original_node.func)
        if parts and self._qualify(parts) in COMMAND_FUNCS:
            for index, (orig, arg) in enumerate(zip(original_node.args, args)):
                if (arg.keyword is None and index == 0) or (arg.keyword and arg.keyword.value in ("args", "cmd")):
                    command = self._command(orig.value, arg.value)
                    if command is not arg.value:
                        args[index] = arg.with_changes(value=command)
        if all(a is b for a, b in zip(args, updated_node.args)):
            return updated_node
        return updated_node.with_changes(args=args)

    def _keyword(self, orig: cst.Arg, arg: cst.Arg) -> cst.Arg:
        assert arg.keyword is not None and orig.keyword is not None
        key, value = self._occurrence(orig.keyword, cst.SimpleString(f'"{arg.keyword.value}"'), arg.value,
                                      write=True)
        name = verbatim_string(key)
        if name != arg.keyword.value or value is not None:
            return arg.with_changes(keyword=cst.Name(name or arg.keyword.value), value=value or arg.value)
        return arg

    # -- shell commands in Python strings --------------------------------------------------
    def _qualify(self, parts: list[str]) -> str:
        # FileFacts drops a module alias once `os.environ[...] = ...` assigns through it, so the
        # literal spelling `os.system` / `subprocess.run` counts too
        return self.context.facts.qualify(parts) or ".".join(parts)

    def _commands(self) -> set[str]:
        """Names that some subprocess-like call in this file receives as its command."""
        if self._command_names is None:
            names: set[str] = set()
            for node in self.context.model.of_type(ast.Call):
                assert isinstance(node, ast.Call)
                if node.args and isinstance(node.args[0], ast.Name):
                    parts = ast_dotted_parts(node.func)
                    if parts and self._qualify(parts) in COMMAND_FUNCS:
                        names.add(node.args[0].id)
            self._command_names = names
        return self._command_names

    def _command(self, original: cst.BaseExpression, node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.SimpleString):
            raw = verbatim_string(node)
            if raw is None:
                return node
            new = self._shell(original, raw)
            return with_string(node, new) if new != raw and _safe_text(node, new) else node
        if isinstance(node, cst.FormattedString):
            return self._fstring(original, node)
        if isinstance(node, (cst.ConcatenatedString, cst.BinaryOperation)) and (
                not isinstance(node, cst.BinaryOperation) or isinstance(node.operator, cst.Add)):
            assert isinstance(original, type(node))
            left = self._command(original.left, node.left)
            right = self._command(original.right, node.right)
            if left is node.left and right is node.right:
                return node
            return node.with_changes(left=left, right=right)
        if isinstance(node, (cst.List, cst.Tuple)):
            return self._argv(original, node)
        return node

    def _shell(self, original: cst.CSTNode, text: str) -> str:
        changes = envmap.shell_changes(text, self.kinds)
        for change in changes:
            if change.replacement is None:
                self.report(original, change.message, severity=change.severity)
        edits = [c for c in changes if c.replacement is not None]
        for message in dict.fromkeys(c.message for c in edits):
            self.fixed(original, message)
        return envmap.apply_changes(text, edits)

    def _fstring(self, original: cst.CSTNode, node: cst.FormattedString) -> cst.FormattedString:
        joined = fstring_template(node)
        if joined is None:
            return node
        new = self._shell(original, joined)
        if new == joined:
            return node
        pieces = _PLACEHOLDER_RE.split(new)
        text_parts = [p for p in node.parts if isinstance(p, cst.FormattedStringText)]
        if len(pieces) != len(node.parts) - len(text_parts) + 1 or node.end in new:
            return node
        parts: list[cst.BaseFormattedStringContent] = []
        cursor = 0
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                continue
            parts.append(cst.FormattedStringText(pieces[cursor]))
            parts.append(part)
            cursor += 1
        parts.append(cst.FormattedStringText(pieces[cursor]))
        return node.with_changes(parts=[p for p in parts if not (isinstance(p, cst.FormattedStringText) and not p.value)])

    def _argv(self, original: cst.CSTNode, node: cst.List | cst.Tuple) -> cst.BaseExpression:
        elements = list(node.elements)
        values = [verbatim_string(e.value) for e in elements]
        for index, value in enumerate(values):
            if value is None:
                continue
            new = None
            match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", value, re.S)
            if match and envmap.is_known(match.group(1)):
                new = self._shell(original, value)  # one `NAME=value` word, e.g. for `env`
            elif "backend" in self.kinds and value.endswith("nccl") and (
                    (value.partition("=")[0] in envmap.BACKEND_FLAGS and value.endswith("=nccl"))
                    or (index and values[index - 1] in envmap.BACKEND_FLAGS and value == "nccl")):
                new = value[:-4] + "hccl"
                self.fixed(original, "`--backend nccl` → `--backend hccl` (the NPU collective backend)")
            elif "nvidia_smi" in self.kinds and value.rsplit("/", 1)[-1] == "nvidia-smi":
                self._shell(original, value)
            if new is not None and new != value:
                element_value = elements[index].value
                assert isinstance(element_value, cst.SimpleString)
                elements[index] = elements[index].with_changes(value=with_string(element_value, new))
        if all(a is b for a, b in zip(elements, node.elements)):
            return node
        return node.with_changes(elements=elements)


def subscript_key(node: cst.Subscript) -> cst.SimpleString | None:
    """`"KEY"` of `mapping["KEY"]`; None for any other subscript."""
    index = node.slice[0].slice if len(node.slice) == 1 else None
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        return index.value
    return None


def _with_subscript_key(node: cst.Subscript, key: cst.SimpleString) -> cst.Subscript:
    element = node.slice[0]
    return node.with_changes(slice=[element.with_changes(slice=element.slice.with_changes(value=key))])


def _callee_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None

