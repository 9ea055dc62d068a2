"""Where a file names what its imports bind: each `Name`/`Attribute` chain that
`FileFacts.qualify` resolves, by qualified name, with its lines. Every link of a chain counts
(`torch.cuda.amp.autocast` is found under `torch`, `torch.cuda`, `torch.cuda.amp` and itself), as a
rule's `self.resolve(node)` may ask about any of them.

Read by rule gates (`Rule.target_lines`): a rule that acts only on nodes resolving to some
qualified names can act only on these lines. Once per file: `model.derived(qualified_references)`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from codemods.api.rule import LineSpan
from codemods.model.filemodel import FileModel


@dataclass(frozen=True)
class References:
    by_name: dict[str, list[LineSpan]]
    # False where the file calls `__import__`: `RuleContext.resolve` also reads chains on
    # `__import__("torch")`, which are not indexed here, so a gate must not narrow on them
    complete: bool

    def lines(self, wanted: Callable[[str], bool]) -> list[LineSpan] | None:
        """The lines of the chains whose qualified name is `wanted`; None when the index is
        not complete (then no line may be left out)."""
        if not self.complete:
            return None
        return [span for name, spans in self.by_name.items() if wanted(name) for span in spans]


def qualified_references(model: FileModel) -> References:
    aliases = model.facts.aliases
    parents = model.parents
    found: dict[str, list[LineSpan]] = {}
    for node in model.of_type(ast.Name):
        assert isinstance(node, ast.Name)
        name = aliases.get(node.id)
        link: ast.expr = node
        while name is not None:
            found.setdefault(name, []).append((link.lineno, link.end_lineno or link.lineno))
            parent = parents.get(id(link))
            if not (isinstance(parent, ast.Attribute) and parent.value is link):
                break
            link, name = parent, f"{name}.{parent.attr}"
    return References(found, "__import__" not in model.source)
