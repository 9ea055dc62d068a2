"""NPU523 (and the option half of NPU524): option values of the catalogue in Python code.

An option entry of `codemods/data/cuda_only.json` (`at: option`) names an option (`optim`,
`attn_implementation`, `strategy`) and the values that select CUDA-only code (`values`, or a
`pattern`). A value counts where the code gives that option a literal:
- a keyword argument of a call (`TrainingArguments(optim="paged_adamw_32bit")`, `dict(optim=...)`),
  or the positional argument `position` of a call the entry names in `calls` (`RWKV(path, "cuda fp16")`);
- a dict literal's key (`{"optim": "paged_adamw_32bit"}`);
- an assignment or a dataclass field named like the option (`optim: str = field(default="paged_adamw_32bit")`,
  `model.config._attn_implementation = "flash_attention_2"`);
- the default of an argparse option spelled like it (`add_argument("--optim", default="paged_adamw_32bit")`).
A computed value is not reported: nothing says which one it holds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Sequence
from functools import cache
from typing import Any

import libcst as cst

from codemods.api.rule import Fix, LineSpan, Rule
from codemods.data import catalogue
from codemods.model.cstnodes import find_all, string_value, verbatim_string, with_string
from codemods.model.filemodel import FileModel
from codemods.model.imports import split_lines
from npu_migrate.core.diagnostics import Severity

Entry = dict[str, Any]


@cache
def _by_option(code: str) -> dict[str, tuple[Entry, ...]]:
    found: dict[str, list[Entry]] = {}
    for entry in catalogue.option_entries():
        if entry.get("code") == code:
            found.setdefault(entry["option"], []).append(entry)
    return {name: tuple(group) for name, group in found.items()}


def option_prefilter(code: str) -> str:
    """The names of the options a rule reports (a value follows its name), and the callees whose
    positional argument is one (`RWKV(path, "cuda fp16")`)."""
    callees = {call.rsplit(".", 1)[-1] for group in _by_option(code).values() for entry in group
               if entry.get("position") is not None for call in entry.get("calls", ())}
    # a name followed by `=` or `:` (a keyword, an assignment, a field, a dict key), or quoted as
    # a key or a flag (`"optim"`, `"--optim"`): `optim` alone is in every file that says optimizer
    names = "|".join(re.escape(name) for name, group in sorted(_by_option(code).items())
                     if not all(entry.get("calls") for entry in group))  # those are found by their callee
    spelled = [rf"(?:{names})\s*[=:]", rf"""["'](?:--)?(?:{names})["']"""] if names else []
    return "|".join(spelled + [rf"{re.escape(callee)}\(" for callee in sorted(callees)]) or r"(?!)"


@cache
def _entries_of(code: str) -> tuple[tuple[frozenset[str], frozenset[str], re.Pattern[str] | None], ...]:
    """Each option or flag entry of `code`: how its name may be spelled (`half_precision_backend`,
    `half-precision-backend` as a flag, the callee that takes it by position), its values and its
    values' pattern."""
    found = []
    for entry in (*catalogue.option_entries(), *catalogue.option_entries("flag")):
        if entry.get("code") != code:
            continue
        names = [entry["option"]] if entry.get("option") else [flag.lstrip("-") for flag in entry.get("flags", ())]
        spellings = frozenset(n for name in names for n in (name, name.replace("_", "-"))) \
            | {call.rsplit(".", 1)[-1] for call in entry.get("calls", ())}  # `RWKV(path, "cuda fp16")`: its import
        pattern = re.compile(entry["pattern"]) if entry.get("pattern") is not None else None
        found.append((spellings, frozenset(entry.get("values") or ()), pattern))
    return tuple(found)


def _named(model: FileModel, spellings: frozenset[str]) -> bool:
    """Whether the file spells an option's name: in its text, or in a string whose escapes hide it."""
    source = model.source
    return any(name in source for name in spellings) or ("\\" in source and any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and any(name in node.value for name in spellings)
        for node in model.of_type(ast.Constant)))


def _matching_literals(model: FileModel, code: str) -> list[LineSpan]:
    """The lines of the file's literals whose text (as `literal_text` reads it) is a value of an
    entry of `code` whose name the file spells: each value, renamed keyword, offered choice and
    command word an option rule acts on is one, named by a keyword, key, target, parameter or
    flag beside it (`OptionRule.target_lines`)."""
    live = [(values, pattern) for spellings, values, pattern in _entries_of(code) if _named(model, spellings)]
    if not live:
        return []
    values = frozenset().union(*(v for v, _ in live))
    patterns = [p for _, p in live if p is not None]
    lines: list[str] = []
    found: list[LineSpan] = []
    for node in model.of_type(ast.Constant):
        assert isinstance(node, ast.Constant)
        value = node.value
        if isinstance(value, str):
            text = value
        elif value is None or isinstance(value, bool):
            text = str(value)
        elif isinstance(value, (int, float)) and node.lineno == node.end_lineno:
            lines = lines or split_lines(model.source)
            text = lines[node.lineno - 1].encode()[node.col_offset:node.end_col_offset].decode()  # as written
        else:
            continue
        if text in values or any(p.fullmatch(text) for p in patterns):
            found.append((node.lineno, node.end_lineno or node.lineno))
    return found


def literal_text(node: cst.BaseExpression) -> str | None:
    """A literal option value as text: a string's value, `True`/`False`/`None` by name, a number."""
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.value
    return string_value(node)


def _field_default(node: cst.BaseExpression) -> cst.BaseExpression:
    """`field(default=x)` -> x (a dataclass field); anything else as it is."""
    if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)) \
            and (node.func.value if isinstance(node.func, cst.Name) else node.func.attr.value) == "field":
        return next((a.value for a in node.args if a.keyword and a.keyword.value == "default"), node)
    return node


def _target_name(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return None


class OptionRule(Rule):
    """Finds the option values of this rule's code and hands each to `option_found`."""

    fix = Fix.SAFE
    severity = Severity.WARNING

    def target_lines(self) -> list[LineSpan]:
        return self.context.model.derived(_matching_literals, self.code)

    def option_found(self, entry: Entry, name: str, value: str, original: cst.BaseExpression,
                     updated: cst.BaseExpression) -> cst.BaseExpression:
        """What `updated` (the option's value, `value` as text) becomes: a rewrite where the entry
        has a replacement and the literal can be edited in place, else a report."""
        replacement = entry.get("replacement")
        kept = catalogue.kept_because(entry, self.context.source)
        if kept is not None:
            self.report(original, f"{catalogue.option_message(entry, name, value)} ({kept})")
            return updated
        if entry["action"] == "rewrite" and replacement is not None and isinstance(updated, cst.SimpleString) \
                and verbatim_string(updated) is not None:
            self.fixed(original, f"`{name}=\"{value}\"` → `\"{replacement}\"`{catalogue.fix_note(entry)}: "
                                 + catalogue.option_message(entry, name, value))
            return with_string(updated, replacement)
        self.report(original, catalogue.option_message(entry, name, value),
                    severity=Severity(entry.get("severity", "warning")))
        return updated

    def _value(self, name: str | None, original: cst.BaseExpression, updated: cst.BaseExpression,
               callee: str | None = None, position: int | None = None) -> cst.BaseExpression:
        if name is None:
            return updated
        name = name.lstrip("_")  # `model.config._attn_implementation`
        for entry in _by_option(self.code).get(name, ()):
            if entry.get("calls") and callee not in entry["calls"]:
                continue
            if position is not None and entry.get("position") != position:
                continue
            value = literal_text(_field_default(original))
            if value is not None and catalogue.value_matches(entry, value):
                inner = _field_default(updated)
                new = self.option_found(entry, name, value, _field_default(original), inner)
                if new is inner:
                    return updated
                if inner is updated:
                    return new
                assert isinstance(updated, cst.Call)
                return updated.with_changes(args=[a.with_changes(value=new) if a.value is inner else a
                                                  for a in updated.args])
        return updated

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if len(original_node.args) != len(updated_node.args):
            return updated_node  # another rule added or removed an argument: positions no longer pair
        callee = self.resolve(original_node.func)
        flag = _argparse_option(original_node)
        if flag is not None:
            choices = next((a.value for a in original_node.args if a.keyword and a.keyword.value == "choices"), None)
            if choices is not None:
                self._offered(flag, choices, original_node)
        args = list(updated_node.args)
        keywords = {a.keyword.value for a in original_node.args if a.keyword is not None}
        for index, (before, after) in enumerate(zip(original_node.args, updated_node.args, strict=True)):
            if before.keyword is not None and (renamed := self._renamed(before.keyword.value, before.value, keywords)):
                if renamed[1] is not None:
                    args[index] = after.with_changes(keyword=cst.Name(renamed[0]), value=renamed[1])
                continue
            if before.keyword is not None:
                name = flag if flag and before.keyword.value == "default" else before.keyword.value
                new = self._value(name, before.value, after.value, callee)
            elif before.star:
                continue
            else:
                new = self._positional(index, before.value, after.value, callee)
            if new is not after.value:
                args[index] = after.with_changes(value=new)
        return updated_node.with_changes(args=args) if args != list(updated_node.args) else updated_node

    def _positional(self, index: int, original: cst.BaseExpression, updated: cst.BaseExpression,
                    callee: str | None) -> cst.BaseExpression:
        for name, group in _by_option(self.code).items():
            if any(e.get("position") == index and callee in e.get("calls", ()) for e in group):
                return self._value(name, original, updated, callee, index)
        return updated

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.BaseExpression:
        if len(original_node.elements) != len(updated_node.elements):
            return updated_node
        elements = list(updated_node.elements)
        keys = {string_value(e.key) for e in original_node.elements if isinstance(e, cst.DictElement)}
        for index, (before, after) in enumerate(zip(original_node.elements, updated_node.elements, strict=True)):
            if isinstance(before, cst.DictElement) and isinstance(after, cst.DictElement):
                key = string_value(before.key)
                if key is not None and isinstance(before.key, cst.SimpleString) and \
                        (renamed := self._renamed(key, before.value, keys)):
                    if renamed[1] is not None:
                        elements[index] = after.with_changes(key=with_string(before.key, renamed[0]), value=renamed[1])
                    continue
                new = self._value(key, before.value, after.value)
                if new is not after.value:
                    elements[index] = after.with_changes(value=new)
        return updated_node.with_changes(elements=elements) if elements != list(updated_node.elements) \
            else updated_node

    def _renamed(self, name: str, value: cst.BaseExpression, taken: Collection[str | None]
                 ) -> tuple[str, cst.BaseExpression | None] | None:
        """A keyword or dict key whose route is another option with a value of its own
        (`use_flash_attention_2=True` -> `attn_implementation="sdpa"`): (the new name, the new
        value); (the name, None) where the call or dict gives that option too (reported, kept:
        renaming would repeat it); None where no such entry applies."""
        text = literal_text(value)
        for entry in _by_option(self.code).get(name, ()):
            option, replacement = entry.get("replacement_option"), entry.get("replacement")
            if entry["action"] != "rewrite" or option is None or replacement is None or text is None \
                    or not catalogue.value_matches(entry, text):
                continue
            if option in taken:
                self.report(value, catalogue.option_message(entry, name, text) + f" (`{option}` is given too: drop `{name}`)")
                return name, None
            self.fixed(value, f"`{name}={text}` → `{option}=\"{replacement}\"`{catalogue.fix_note(entry)}: "
                                 + catalogue.option_message(entry, name, text))
            return option, cst.SimpleString(f'"{replacement}"')
        return None

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        name = _target_name(original_node.target)
        self._offered(name, original_node.annotation.annotation, original_node)
        if original_node.value is None or updated_node.value is None:
            return updated_node
        new = self._value(name, original_node.value, updated_node.value)
        return updated_node.with_changes(value=new) if new is not updated_node.value else updated_node

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        """`def finetune(quantize: Literal["bnb.nf4", ...] | None = None)`, `def load(strategy="cuda fp16")`."""
        name = original_node.name.value
        if original_node.annotation is not None:
            self._offered(name, original_node.annotation.annotation, original_node)
        if original_node.default is None or updated_node.default is None:
            return updated_node
        new = self._value(name, original_node.default, updated_node.default)
        return updated_node.with_changes(default=new) if new is not updated_node.default else updated_node

    def _offered(self, name: str | None, values: cst.BaseExpression, where: cst.CSTNode) -> None:
        """A parameter, field or argparse option that offers values selecting CUDA-only code
        (`Literal["bnb.nf4", ...]`, `choices=[...]`): reported once, where they are offered."""
        if name is None:
            return
        for entry in _by_option(self.code).get(name.lstrip("_"), ()):
            if entry.get("calls"):
                continue
            offered = [text for node in find_all(values, cst.SimpleString)
                       if (text := string_value(node)) is not None and catalogue.value_matches(entry, text)]
            if offered:
                self.report(where, f"`{name}` offers {', '.join(repr(v) for v in offered)}: "
                                   + catalogue.option_message(entry, name, offered[0]))
                return

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        elements = self._command(original_node.elements, updated_node.elements)
        return updated_node if elements is None else updated_node.with_changes(elements=elements)

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        elements = self._command(original_node.elements, updated_node.elements)
        return updated_node if elements is None else updated_node.with_changes(elements=elements)

    def _command(self, original: Sequence[cst.BaseElement],
                 updated: Sequence[cst.BaseElement]) -> list[cst.BaseElement] | None:
        """A command as a list of words (`["litgpt", "serve", path, "--quantize", "bnb.nf4"]`): a
        flag of the catalogue followed by its value. The new elements, or None: nothing changed."""
        if len(original) != len(updated):
            return None
        words = [string_value(e.value) for e in original]
        elements = list(updated)
        for index in range(1, len(words)):
            flag, value = words[index - 1], words[index]
            if flag is None or value is None:
                continue
            entry = catalogue.option_entry(flag, value, "flag")
            if entry is None or entry.get("code") != self.code:
                continue
            before, after = original[index], updated[index]
            new = self.option_found(entry, flag.lstrip("-"), value, before.value, after.value)
            if new is not after.value:
                elements[index] = after.with_changes(value=new)
        return elements if elements != list(updated) else None

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if len(original_node.targets) != 1:
            return updated_node
        new = self._value(_target_name(original_node.targets[0].target), original_node.value, updated_node.value)
        return updated_node.with_changes(value=new) if new is not updated_node.value else updated_node


def _argparse_option(call: cst.Call) -> str | None:
    """`add_argument("--optim", ...)` -> "optim" (the option whose `default=` this call sets)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
        return None
    for arg in call.args:
        text = string_value(arg.value) if arg.keyword is None else None
        if text and text.startswith("--"):
            return text[2:].replace("-", "_")
    return None
