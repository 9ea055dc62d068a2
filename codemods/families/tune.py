"""NPU600-NPU629, the opt-in `tune` family: Ascend-specific tuning (fused optimizers, compile
mode, static shapes, fused operators, the launch environment), enabled together with
`apply --enable tune` or one by one by code or name (docs/tune.md).

Every rewrite is gated by the configured torch_npu release (`target-version`; torch_npu X.Y pins
torch X.Y): below the release that has the API the rule writes, it keeps the code and says why
(`TuneRule.version_blocks`). The facts come from `codemods/data/tune.json` and the version rows
of `codemods/data/api_versions.json`.
"""

from __future__ import annotations

import ast
import re
import textwrap
from typing import Any, ClassVar

import libcst as cst

from codemods.analyses.tunefacts import TuneFacts, builds_optimizer, tune_data, tune_facts
from codemods.api.rule import Fix, Rule
from codemods.api.targets import api_table, version_allows
from npu_migrate.core.diagnostics import Severity

FAMILY = "tune"


class TuneRule(Rule):
    """Base of the tune rules: opt-in, in the `tune` family, gated by `api` (a row of
    api_versions.json)."""

    default = False
    families = (FAMILY,)
    fix = Fix.UNSAFE
    severity = Severity.INFO
    # under --target portable a tuning rewrite is an info line with this reason, not a warning
    portable_keeps = ("Ascend tuning is torch_npu code; a portable program keeps its device-generic "
                      "form (tune with --target npu)")
    api: ClassVar[str] = ""

    @property
    def facts(self) -> TuneFacts:
        return self.context.model.derived(tune_facts)

    def training_start(self, node: cst.Call) -> bool:
        """True at the first call of an entry script that trains (a `.backward()` or an optimizer
        built: `TuneFacts.trains`), once per file: where NPU601 and NPU621 put their diagnostic."""
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if self.file.get("training_start") or not (
                (last == "backward" and isinstance(func, cst.Attribute)) or builds_optimizer(self.resolve(func), last)):
            return False
        self.file["training_start"] = True
        return self.facts.entry and self.facts.trains

    def version_blocks(self, node: cst.CSTNode, what: str, api: str | None = None) -> bool:
        """True (and a report at `node`) when target-version is older than the torch_npu release
        that has `api` (default: the rule's own)."""
        api = api or self.api
        if version_allows(self.context.options, api):
            return False
        self.report(node, f"{what}: not applied, `{api}` needs torch_npu {api_table()[api]['since']} "
                          f"and target-version is {self.context.options.get('target_version')} "
                          "(codemods/data/api_versions.json)")
        return True


def data() -> dict[str, Any]:
    return tune_data()


def opportunity(code: str) -> dict[str, str]:
    """What analyze says about a rule's change: kind, section, expected effect."""
    found: dict[str, str] = tune_data()["opportunities"][code]
    return found


def line_of(rule: Rule, node: cst.CSTNode) -> int:
    """The file line where `node` (of the piece being visited) starts."""
    from codemods.api.positions import node_positions

    module = rule.context.module
    if module is None:
        return 0
    return node_positions(module, [node])[id(node)][0] + rule.context.line_offset


LAUNCH_WORD = re.compile(r"python[0-9.]*|torchrun|deepspeed|accelerate")


def first_launch(text: str) -> int | None:
    """Offset of the start of the line holding the first command that starts training (python,
    torchrun, deepspeed, accelerate launch), or None. Assignments before the command
    (`A=1 python train.py`) and `env`/`nohup`/`exec` prefixes are skipped."""
    from codemods.model.shellwords import lex

    for command in lex(text):
        for word in command:
            value = word.literal(text) or ""
            if ("=" in value and not value.startswith("-")) or value in ("env", "nohup", "exec", "time"):
                continue
            if LAUNCH_WORD.fullmatch(value.rsplit("/", 1)[-1]):
                return text.rfind("\n", 0, word.start) + 1
            break
    return None


def launch_settings(text: str, options: Any) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The launch variables of tune.json that `text` does not set yet: (to add, too new for
    target-version)."""
    wanted: list[dict[str, str]] = []
    too_new: list[dict[str, str]] = []
    for entry in tune_data()["launch_env"]:
        if re.search(rf"\b{entry['name']}\b", text):
            continue
        (wanted if version_allows(options, entry["api"]) else too_new).append(entry)
    return wanted, too_new


# -- the fused-operator rules read patterns from Python's `ast` of a piece of code ------------

def parsed(node: cst.CSTNode) -> tuple[ast.AST | None, str]:
    """The `ast` of a LibCST statement or expression (None when it does not parse alone) and the
    text it was parsed from (for `ast.get_source_segment`: literals keep their spelling)."""
    text = textwrap.dedent(cst.Module([]).code_for_node(node)).strip()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, text
    body = tree.body[0] if len(tree.body) == 1 else tree
    return (body.value if isinstance(body, ast.Expr) else body), text


def same(a: ast.AST | None, b: ast.AST | None) -> bool:
    return a is not None and b is not None and ast.dump(a) == ast.dump(b)


def last_dim(node: ast.AST) -> bool:
    """`-1` as a dimension argument."""
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
        isinstance(node.operand, ast.Constant) and node.operand.value == 1


def keyword_value(call: ast.Call, name: str, position: int | None = None) -> ast.AST | None:
    found = next((k.value for k in call.keywords if k.arg == name), None)
    if found is None and position is not None and len(call.args) > position:
        found = call.args[position]
    return found
