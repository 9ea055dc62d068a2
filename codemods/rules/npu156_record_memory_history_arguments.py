"""NPU156: the record-memory-history-arguments rule."""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.namemap import CoverageRule
from codemods.model.cstnodes import keyword
from npu_migrate.core.diagnostics import Severity

_HISTORY = frozenset({"torch.cuda.memory._record_memory_history", "torch.npu.memory._record_memory_history",
                      "torch_npu.npu.memory._record_memory_history"})


_SNAPSHOT = frozenset(f"{module}.{fn}" for module in ("torch.cuda.memory", "torch.npu.memory",
                                                      "torch_npu.npu.memory")
                      for fn in ("_snapshot", "_dump_snapshot"))


# upstream's legacy signature, in positional order
_LEGACY = ("enabled", "record_context", "trace_alloc_max_entries", "trace_alloc_record_context", "device",
           "record_context_cpp", "clear_history", "compile_context", "global_record_annotations",
           "skip_actions")


_CURRENT = ("enabled", "context", "stacks", "max_entries", "device")  # what torch_npu accepts


_LEGACY_ONLY = frozenset({"record_context", "trace_alloc_max_entries", "trace_alloc_record_context",
                          "record_context_cpp"})


_REJECTED = ("clear_history", "compile_context", "global_record_annotations", "skip_actions")


def _literal(node: cst.BaseExpression) -> Any:
    """True/False/None for those names, a marker for anything else."""
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    return _literal


def _string(text: str | None) -> cst.BaseExpression:
    return cst.Name("None") if text is None else cst.SimpleString(f'"{text}"')


def _choose(condition: cst.BaseExpression, if_true: str | None, if_false: str | None) -> cst.BaseExpression:
    """`"a"` / `None` for a literal condition, `"a" if cond else None` for any other."""
    value = _literal(condition)
    if value is not _literal:
        return _string(if_true if value else if_false)
    return cst.IfExp(test=condition, body=_string(if_true), orelse=_string(if_false))


class RecordMemoryHistory(CoverageRule):
    """## What it does

    `_record_memory_history(True, trace_alloc_max_entries=…)` and keywords torch_npu rejects are rewritten

    ## Why

    torch_npu's `_record_memory_history(enabled="all", context="all", stacks="all", max_entries, device)`
    has no bool form and none of upstream's newer keywords (fact sheet §2.2): `_record_memory_history(True,
    trace_alloc_max_entries=100000)` fails the pybind type check, and `clear_history=`,
    `compile_context=`, `global_record_annotations=`, `skip_actions=` raise `TypeError`.

    The legacy form (a bool `enabled`, or any of `record_context`, `trace_alloc_max_entries`,
    `trace_alloc_record_context`, `record_context_cpp`; positional arguments read in upstream's legacy
    order) is rewritten: `True`→`"all"`, `False`→`None`, `record_context=False`→`context=None`,
    `record_context_cpp`→`stacks="all"`/`"python"`, `trace_alloc_max_entries`→`max_entries`; a
    non-literal flag becomes a conditional (`"all" if flag else None`). Keywords torch_npu rejects are
    dropped, each with a warning. An `enabled` value that may be a bool gets an info note; more than
    five positional arguments are reported. `augment_with_fx_traces=` of `_snapshot`/`_dump_snapshot`
    is reported (torch_npu master only). Calls through `torch.cuda.memory`, `torch.npu.memory` and
    `torch_npu.npu.memory` are checked, so code already half-ported is fixed too.

    ## Example

    ```python
    # before
    torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=100000, record_context=False)
    torch.cuda.memory._record_memory_history("all", max_entries=10, clear_history=True)
    # after (NPU155 renames the module)
    torch.npu.memory._record_memory_history("all", context=None, max_entries=100000)
    torch.npu.memory._record_memory_history("all", max_entries=10)   # warning: clear_history dropped
    ```

    ## Fix safety

    Safe for the translated arguments. The dropped keywords have no NPU counterpart; each drop is reported so the user can see what the recording no longer does (for example, clearing the history). Suppress a line with `# npu-migrate: ignore[NPU156]`.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU156"
    name = "record-memory-history-arguments"
    summary = "`_record_memory_history(True, trace_alloc_max_entries=…)` and keywords torch_npu rejects are rewritten"
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = r"_record_memory_history|_snapshot\b|_dump_snapshot"
    gate_names = _HISTORY | _SNAPSHOT

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        qualified = self.resolve(original_node.func)
        if qualified in _SNAPSHOT:
            self._check_snapshot(original_node)
            return updated_node
        if qualified not in _HISTORY:
            return updated_node
        args = list(updated_node.args)
        if any(arg.star for arg in args):
            self.report(original_node, "cannot check `*args`/`**kwargs` here: torch_npu's "
                        "_record_memory_history takes (enabled, context, stacks, max_entries, device) "
                        "and no bool")
            return updated_node
        named = self._by_name(args, original_node)
        if named is None:
            return updated_node
        enabled = named.get("enabled")
        legacy = (enabled is not None and _literal(enabled.value) in (True, False)) or \
            bool(_LEGACY_ONLY & set(named))
        if legacy:
            return self._from_legacy(original_node, updated_node, named)
        if enabled is not None and not isinstance(enabled.value, (cst.SimpleString, cst.Name)):
            self.report(original_node, "if `enabled` can be a bool here, pass \"all\" (record) or None "
                        "(stop) instead: torch_npu has no bool form", severity=Severity.INFO)
        dropped = [key for key in _REJECTED if key in named]
        if not dropped:
            return updated_node
        kept = [arg for arg in args if not (arg.keyword and arg.keyword.value in dropped)]
        for key in dropped:
            self.report(original_node, f"torch_npu's _record_memory_history has no `{key}=`: dropped")
        self.fixed(original_node, "dropped " + ", ".join(f"`{k}=`" for k in dropped))
        return updated_node.with_changes(args=_tidy(kept, args))

    def _by_name(self, args: list[cst.Arg], original: cst.Call) -> dict[str, cst.Arg] | None:
        """Arguments by parameter name; positions are read with the legacy order when the first
        argument is a bool, else with the current one."""
        positional = [arg for arg in args if arg.keyword is None]
        legacy_first = bool(positional) and _literal(positional[0].value) in (True, False)
        order = _LEGACY if legacy_first else _CURRENT
        if len(positional) > len(order):
            self.report(original, "too many positional arguments for torch_npu's _record_memory_history "
                        "(enabled, context, stacks, max_entries, device)")
            return None
        named = {order[i]: arg for i, arg in enumerate(positional)}
        named.update({arg.keyword.value: arg for arg in args if arg.keyword is not None})
        return named

    def _from_legacy(self, original: cst.Call, updated: cst.Call, named: dict[str, cst.Arg]) -> cst.Call:
        """The bool API of upstream (`_record_memory_history_legacy`) in torch_npu's terms."""
        new: list[cst.Arg] = []
        enabled = named.get("enabled")
        new.append(cst.Arg(_choose(enabled.value, "all", None) if enabled else _string("all")))
        if "record_context" in named:
            context = _choose(named["record_context"].value, "all", None)
            if not (isinstance(context, cst.SimpleString)):  # "all" is the default: say nothing then
                new.append(keyword("context", context))
        if "record_context_cpp" in named:
            new.append(keyword("stacks", _choose(named["record_context_cpp"].value, "all", "python")))
        if "trace_alloc_max_entries" in named:
            new.append(keyword("max_entries", named["trace_alloc_max_entries"].value))
        if "device" in named:
            new.append(keyword("device", named["device"].value))
        for key in ("trace_alloc_record_context", *_REJECTED):
            if key in named:
                self.report(original, f"torch_npu's _record_memory_history has no `{key}`: dropped"
                            + (" (alloc/free stacks are recorded with context=\"all\")"
                               if key == "trace_alloc_record_context" else ""))
        with_commas = [arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                       for arg in new[:-1]] + new[-1:]
        self.fixed(original, "legacy bool form → torch_npu's (enabled, context, stacks, max_entries) form")
        return updated.with_changes(args=with_commas)

    def _check_snapshot(self, call: cst.Call) -> None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "augment_with_fx_traces":
                self.report(arg, "`augment_with_fx_traces=` is accepted by torch_npu master only; "
                            "release branches raise TypeError", severity=Severity.INFO)


def _tidy(kept: list[cst.Arg], original: list[cst.Arg]) -> list[cst.Arg]:
    """Drop the dangling comma left when the last argument was removed."""
    if kept and original and kept[-1] is not original[-1]:
        kept[-1] = kept[-1].with_changes(comma=original[-1].comma)
    return kept


CASES = [
    Invalid(
        """\
    import os
    import torch
    torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=100000, record_context=False)
    torch.cuda.memory._record_memory_history("all", max_entries=10, clear_history=True)
    """,
        after="""\
    import os
    import torch
    torch.cuda.memory._record_memory_history("all", context=None, max_entries=100000)
    torch.cuda.memory._record_memory_history("all", max_entries=10)
    """,
    ),
    Valid(
        """\
    import os
    import torch
    torch.cuda.memory._record_memory_history("all", context=None, max_entries=100000)
    torch.cuda.memory._record_memory_history("all", max_entries=10)
    """,
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=100000)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history("all", max_entries=100000)
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history(False)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history(None)
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history(enabled=True, record_context=False)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history("all", context=None)
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history(True, True, 5000, True, None, True)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history("all", stacks="all", max_entries=5000, device=None)
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history(flag, trace_alloc_max_entries=n, record_context_cpp=cpp)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history("all" if flag else None, stacks="all" if cpp else "python", max_entries=n)
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history("all", max_entries=10, clear_history=True)
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history("all", max_entries=10)
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch
    torch.cuda.memory._record_memory_history(
        max_entries=10,
        skip_actions=['free'],
    )
    """,
        after="""\
    import torch
    import torch_npu  # noqa: F401
    torch.npu.memory._record_memory_history(
        max_entries=10,
    )
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
    Invalid(
        """\
    import torch_npu
    torch_npu.npu.memory._record_memory_history(True)
    """,
        after="""\
    import torch_npu
    torch_npu.npu.memory._record_memory_history("all")
    """,
        with_rules=('NPU100',),
    ),
    Invalid(
        """\
    from torch.cuda.memory import _record_memory_history
    _record_memory_history(True)
    """,
        after="""\
    import torch_npu  # noqa: F401
    from torch_npu.npu.memory import _record_memory_history
    _record_memory_history("all")
    """,
        codes=('NPU100', 'NPU155', 'NPU156'),
        with_rules=('NPU155', 'NPU100'),
    ),
]
