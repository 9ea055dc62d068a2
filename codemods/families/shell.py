"""NPU251-NPU257: launch scripts (`*.sh`): the environment mapping of NPU201-NPU207, line-based.

Each rule rewrites only words it understands -- `NAME=value` assignments (also after `export`,
`env`, `docker -e`, `mpirun -x`), `export/unset NAME`, `$NAME` / `${NAME...}` expansions outside
single quotes, `--backend nccl` launcher arguments -- and never text inside comments, single
quotes or `echo`/`printf` arguments. An edit on a line carrying `# npu-migrate: ignore[CODE]` is
skipped here; the engine drops suppressed diagnostics.
"""

from __future__ import annotations

from typing import ClassVar

from codemods.analyses import envmap
from codemods.api.rule import Fix, Rule
from codemods.model.shellwords import LineIndex


class ShellRule(Rule):
    language = "shell"
    fix = Fix.SAFE
    kinds: ClassVar[frozenset[str]] = frozenset()

    def rewrite_text(self, text: str) -> str:
        index = LineIndex(text)
        edits = []
        said: set[tuple[int, str]] = set()  # a name and its value edit are one explained change
        for change in envmap.shell_changes(text, self.kinds):
            line, col = index.position(change.offset)
            if change.replacement is None:
                self.report_at(line, col, change.message, change.severity)
            elif not self.context.suppressions.suppresses(self.code, line):
                edits.append(change)
                if (line, change.message) not in said:
                    said.add((line, change.message))
                    self.fixed_at(line, col, change.message)
        return envmap.apply_changes(text, edits)


    def apply_twins(self, text: str, changes: list[envmap.Change]) -> str:
        """Under --target portable: insert the twins `changes` describes (codemods/analyses/
        portable.py) and report what they report."""
        index = LineIndex(text)
        edits = []
        for change in changes:
            line, col = index.position(change.offset)
            if change.replacement is None:
                self.report_at(line, col, change.message, change.severity)
            elif not self.context.suppressions.suppresses(self.code, line):
                edits.append(change)
                self.fixed_at(line, col, change.message)
        return envmap.apply_changes(text, edits)
