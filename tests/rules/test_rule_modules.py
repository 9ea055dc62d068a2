"""The shape of codemods/rules: one rule (one code) a module, named after its code, and no rule
module importing another (shared code lives in codemods/families and codemods/analyses)."""

from __future__ import annotations

import ast
from pathlib import Path

from codemods.api.registry import builtin_rules

RULES_DIR = Path(__file__).resolve().parents[2] / "codemods" / "rules"
MODULES = sorted(p for p in RULES_DIR.glob("*.py") if p.name != "__init__.py")


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add("." * node.level + node.module)
    return found


def test_no_rule_module_imports_another() -> None:
    offenders = {p.name: sorted(m for m in _imported(p) if m.startswith(("codemods.rules", ".")))
                 for p in MODULES}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_one_rule_a_module_named_after_its_code() -> None:
    by_module: dict[str, list[str]] = {}
    for rule in builtin_rules():
        by_module.setdefault(rule.__module__.rsplit(".", 1)[1], []).append(rule.code)
    assert sorted(by_module) == [p.stem for p in MODULES]
    for module, codes in by_module.items():
        assert len(codes) == 1 and module.startswith(codes[0].lower() + "_"), (module, codes)
