"""NPU161: the cudnn-flags rule."""

from __future__ import annotations

import ast
import functools
from typing import Any

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.positions import node_positions
from codemods.api.rule import Fix
from codemods.families.namemap import NameMapRule, entries_for, name_prefilter
from codemods.model.astnodes import ast_dotted_parts, comment_spans, literal_spans, qualified_name
from codemods.model.cstnodes import code_of
from codemods.model.filemodel import FileModel
from codemods.model.imports import split_lines
from npu_migrate.core.diagnostics import Severity

DATA = "coverage_backends.json"

# where a statement sits: its line and its place among the statements of that line (`a = 1; b = 2`)
Place = tuple[int, int]


@functools.cache
def removed_flags() -> frozenset[str]:
    """The flags whose plain assignment the npu target removes (`"assignment": "remove"` rows)."""
    return frozenset(e["cuda"] for e in entries_for(DATA, "NPU161") if e.get("assignment") == "remove")


class CudnnFlags(NameMapRule):
    """## What it does

    `cudnn.benchmark` / `cudnn.deterministic` / `cudnn.enabled` have no effect on NPU; a plain
    `cudnn.benchmark = ...` line is removed

    ## Why

    `torch.backends.cudnn.benchmark`, `deterministic`, `enabled`, `benchmark_limit` and `flags(...)`
    are accepted on an Ascend machine but no NPU code reads them (fact sheet §2.5).
    `deterministic = True` is a **warning**: the run is no longer made reproducible. For
    determinism on NPU use `torch.use_deterministic_algorithms(True)` (plus
    `HCCL_DETERMINISTIC=true` for collectives) or `torch_npu.npu.set_deterministic_level`. Nothing
    is written for it: adding `use_deterministic_algorithms(True)` makes non-deterministic ops
    raise, which is a decision for the user.

    `benchmark` and `benchmark_limit` only choose how cuDNN autotunes convolutions, which the NPU
    does not have: a statement that only sets one of them is removed, as Huawei's ModelZoo ports
    delete it. Kept, the line would be reported by every later `apply --check`, so a migrated tree
    could never be clean. It is removed only when all of these hold, and otherwise kept and reported
    (info) as before:

    - it is a plain assignment with one target (`torch.backends.cudnn.benchmark = x`, any import
      spelling: `cudnn.benchmark` after `from torch.backends import cudnn`); not `a = b = True`,
      `+=` or an annotated assignment;
    - computing the value calls nothing the program would miss: a literal, a name, a chain of attributes,
      or a comparison, `and`/`or`/`not` of those (no call, no subscript, no `:=`), on one line;
    - no comment on its line or on the line right above it: a comment is the author's note about
      the setting, which the user should see;
    - it is not the only statement of its block (an empty block would not parse): of a block that
      holds nothing else, the last one is kept;
    - the file never reads the flag back (`if torch.backends.cudnn.benchmark:`): there the value
      assigned is data.

    `benchmark_limit` goes with `benchmark`: assigning it does not raise where cuDNN is missing
    (on a CPU-only torch 2.13 it is a plain attribute of `torch.backends.cudnn`, so the NPU's torch
    accepts it too), and it only bounds the same autotuning. `enabled` stays reported: code that
    turns cuDNN off usually works around a CUDA problem the user should look at.

    ## Example

    ```python
    # before
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    # after (--target npu)
    torch.backends.cudnn.deterministic = True   # warning: use torch.use_deterministic_algorithms(True)
    ```

    ## Fix safety

    Safe: no NPU code reads `cudnn.benchmark` or `cudnn.benchmark_limit` (torch_npu has no cuDNN),
    the value removed computes nothing that could act (no call), and a file that reads the flag
    back keeps the line. What another module would read back from the flag is the limit of the
    check: it then sees the default (False). Suppress a line with
    `# npu-migrate: ignore[NPU161]` (a comment on the line also keeps it).

    ## Targets

    - **npu**: removes a plain `cudnn.benchmark` / `cudnn.benchmark_limit` assignment (safe fix); reports the other flags (diagnostic only)
    - **portable**: not yet (reported: the flag does act on CUDA)
    """

    code = "NPU161"
    name = "cudnn-flags"
    summary = ("`cudnn.benchmark` / `cudnn.deterministic` / `cudnn.enabled` have no effect on NPU; a plain "
               "`cudnn.benchmark = ...` line is removed")
    fix = Fix.SAFE
    severity = Severity.WARNING
    data_file = DATA
    prefilter = name_prefilter(DATA, "NPU161")

    # -- which assignments go: decided on the file's `ast` (the piece LibCST sees may be one
    # statement of a block), acted on in the block that holds them ---------------------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._mark_removed(node.body)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._mark_removed(node.body)

    def _mark_removed(self, body: Any) -> None:
        """Marks the statements of one line that go, and keeps their flag from being reported."""
        if self.target != "npu" or self.report_only:
            return
        for index, small in enumerate(body):
            target = _flag_target(small)
            if target is None or self.resolve(target) not in removed_flags() or self.context.module is None:
                continue
            line = node_positions(self.context.module, [small])[id(small)][0]
            if (line + self.context.line_offset, index) in self.context.model.derived(removable_assignments,
                                                                                      removed_flags()):
                self.tree.table("removed")[small] = line
                self.vetoed.add(id(target))

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> Any:
        result = super().leave_SimpleStatementLine(original_node, updated_node)
        removed = self.tree.get("removed")
        if not removed or not any(small in removed for small in original_node.body):
            return result
        if not isinstance(result, cst.SimpleStatementLine) or len(result.body) != len(original_node.body):
            self._keep(original_node.body)  # another rule rebuilt the line: leave it
            return result
        if all(small in removed for small in original_node.body):
            self.tree.table("emptied")[original_node] = result  # the block drops the line
            return result
        return self._without_removed(original_node, result)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite,
                                   updated_node: cst.SimpleStatementSuite) -> Any:
        removed = self.tree.get("removed")
        if not removed or not any(small in removed for small in original_node.body):
            return updated_node
        if len(updated_node.body) != len(original_node.body):
            self._keep(original_node.body)
            return updated_node
        return self._without_removed(original_node, updated_node)

    def _without_removed(self, original: Any, updated: Any) -> Any:
        """A line (`a = 1; cudnn.benchmark = True`) or suite without its removed statements; the
        last one left loses the `;` that joined it to a removed one."""
        removed = self.tree.table("removed")
        kept = [new for old, new in zip(original.body, updated.body) if old not in removed]
        if original.body[-1] in removed:
            kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        for small in original.body:
            if small in removed:
                self._removed(small)
        return updated.with_changes(body=kept)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> Any:
        return self._without_emptied_lines(original_node, updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> Any:
        return self._without_emptied_lines(original_node, updated_node)

    def _without_emptied_lines(self, original: Any, updated: Any) -> Any:
        """The block without the lines whose statements all go. The blank lines and comments
        above a removed line move to the statement after it (or to the block's end), so that
        exactly the removed line leaves the text."""
        emptied = self.tree.get("emptied")
        if not emptied:
            return updated
        here = [(line, emptied.pop(line)) for line in original.body if line in emptied]
        present = {id(stmt) for stmt in updated.body}
        for line, new in here:
            if id(new) not in present:  # another rule replaced the line after us: it stays
                self._keep(line.body)
        gone = {id(new): line for line, new in here if id(new) in present}
        if not gone:
            return updated
        if isinstance(original, cst.IndentedBlock) and self.runner is not None \
                and self.runner.suppressed(self.code, original):
            for line in gone.values():
                self._keep(line.body)
            return updated
        body: list[Any] = []
        carried: list[cst.EmptyLine] = []
        for stmt in updated.body:
            line = gone.get(id(stmt))
            if line is not None:
                carried += stmt.leading_lines
                for small in line.body:
                    self._removed(small)
                self.context.removed_lines.add(self.tree.table("removed")[line.body[0]])
                continue
            if carried:
                stmt = stmt.with_changes(leading_lines=[*carried, *stmt.leading_lines])
                carried = []
            body.append(stmt)
        footer = [*carried, *updated.footer]
        if isinstance(updated, cst.Module) and not (body or footer or updated.header):
            # a piece that was only the removed line: LibCST would still write its newline
            return updated.with_changes(body=body, footer=footer, has_trailing_newline=False)
        return updated.with_changes(body=body, footer=footer)

    def _removed(self, small: cst.Assign) -> None:
        written = code_of(small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
        self.fixed(small, f"removed `{written}`: no NPU code reads this cuDNN flag "
                          "(the NPU has no cuDNN autotuning), so the line changed nothing")

    def _keep(self, body: Any) -> None:
        """Statements marked for removal that stay after all: reported as any other use."""
        removed = self.tree.table("removed")
        for small in body:
            target = _flag_target(small)
            if small in removed and target is not None:
                del removed[small]
                name = self.resolve(target) or ""
                found = self.names.lookup(name)
                message = (found[1].message if found else None) or f"`{name}` has no effect on NPU"
                self.report(target, message, severity=found[1].severity if found else Severity.INFO)


def _flag_target(small: cst.CSTNode) -> cst.Attribute | None:
    """The attribute a one-target plain assignment sets (`x.y = v`), else None."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1 \
            and isinstance(small.targets[0].target, cst.Attribute):
        return small.targets[0].target
    return None


def removable_assignments(model: FileModel, flags: frozenset[str]) -> frozenset[Place]:
    """Where the assignments to `flags` are that the npu target removes (the docstring's
    conditions), as (line, place among the statements of that line)."""
    aliases = model.facts.aliases
    read = {name for node in model.of_type(ast.Attribute)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
            and (name := qualified_name(node, aliases)) in flags}
    candidates = [node for node in model.of_type(ast.Assign)
                  if isinstance(node, ast.Assign) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Attribute)
                  and qualified_name(node.targets[0], aliases) in flags - read
                  and node.lineno == node.end_lineno and _inert(node.value)]
    if not candidates:
        return frozenset()
    lines = split_lines(model.source)  # as Python numbers them (a form feed ends no line)
    commented = {span[0] for span in comment_spans(lines, literal_spans(
        model.of_type(ast.Constant), model.of_type(ast.JoinedStr), lines)[0])}
    by_block: dict[int, tuple[list[ast.stmt], list[ast.Assign]]] = {}
    for node in candidates:
        block = _block_of(node, model.parents)
        if block is None or not _alone_on_its_lines(node, block) or node.lineno in commented \
                or _comment_above(node.lineno, lines, commented):
            continue
        by_block.setdefault(id(block), (block, []))[1].append(node)
    places: set[Place] = set()
    for block, removed in by_block.values():
        if len(removed) == len(block):
            removed = removed[:-1]  # the block keeps its last statement
        for node in removed:
            places.add((node.lineno, sum(1 for s in block if s.lineno == node.lineno and s.col_offset < node.col_offset)))
    return frozenset(places)


def _inert(value: ast.expr) -> bool:
    """A value whose computation calls nothing a reader would miss: a literal, a name, a chain of
    attributes, or a comparison, `and`/`or`/`not` of those."""
    if isinstance(value, (ast.Constant, ast.Name)):
        return True
    if isinstance(value, ast.Attribute):
        return ast_dotted_parts(value) is not None
    if isinstance(value, ast.UnaryOp):
        return _inert(value.operand)
    if isinstance(value, ast.BoolOp):
        return all(map(_inert, value.values))
    if isinstance(value, ast.Compare):
        return _inert(value.left) and all(map(_inert, value.comparators))
    return False


def _block_of(node: ast.stmt, parents: dict[int, ast.AST]) -> list[ast.stmt] | None:
    parent = parents.get(id(node))
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(stmt is node for stmt in block):
            return block
    return None


def _alone_on_its_lines(node: ast.stmt, block: list[ast.stmt]) -> bool:
    """Every statement sharing the line is on that line alone: after `x = (1,` on one line and
    `2); flag = v` on the next, the place on the line would not say which statement it is."""
    return all(s.lineno == s.end_lineno for s in block if s.lineno <= node.lineno <= (s.end_lineno or s.lineno))


def _comment_above(line: int, lines: list[str], commented: set[int]) -> bool:
    return line > 1 and line - 1 in commented and lines[line - 2].lstrip().startswith("#")


CASES = [
    Invalid(  # the training header: `benchmark` goes, `deterministic` is explained
        """\
        import torch

        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = True
        """,
        after="""\
        import torch

        torch.backends.cudnn.deterministic = True
        """,
        lines=(4,),
    ),
    Invalid(  # any import spelling; a name, `and`/`not` and comparisons compute nothing that acts
        """\
        from torch.backends import cudnn


        def setup(args):
            cudnn.benchmark = args.fast and not args.debug
            cudnn.benchmark_limit = 0
            return args.seed == 0
        """,
        after="""\
        from torch.backends import cudnn


        def setup(args):
            return args.seed == 0
        """,
    ),
    Invalid(  # only the removed line leaves: the blank lines and comments of the others stay
        """\
        import torch
        x = 1
        # set up the backends

        torch.backends.cudnn.benchmark = True
        y = 2


        def train():
            y = 1

            torch.backends.cudnn.benchmark = True


        z = 3
        """,
        after="""\
        import torch
        x = 1
        # set up the backends

        y = 2


        def train():
            y = 1



        z = 3
        """,
    ),
    Invalid(  # statements joined with `;`: the others stay, without the `;`
        """\
        import torch
        a = 1; torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.benchmark = True; b = 2
        if a: c = 1; torch.backends.cudnn.benchmark = False
        """,
        after="""\
        import torch
        a = 1
        b = 2
        if a: c = 1
        """,
    ),
    Invalid(  # the only statement of its block: removing it would leave the block empty
        """\
        import torch
        if fast:
            torch.backends.cudnn.benchmark = True
        """,
        lines=(3,),
    ),
    Invalid(  # a block of nothing but flags keeps its last one
        """\
        from torch.backends import cudnn
        if fast:
            cudnn.benchmark = True
            cudnn.benchmark_limit = 10
        """,
        after="""\
        from torch.backends import cudnn
        if fast:
            cudnn.benchmark_limit = 10
        """,
        lines=(4,),
    ),
    Invalid(  # a comment on the line or right above it: the author's note stays for the user to read
        """\
        import torch
        torch.backends.cudnn.benchmark = True  # faster convolutions on fixed shapes
        # the input size never changes
        torch.backends.cudnn.benchmark = True
        x = 1
        """,
        lines=(2, 4),
    ),
    Invalid(  # a value that may act (a call, a subscript, `:=`), or one written over several lines
        """\
        import torch
        torch.backends.cudnn.benchmark = config.get("benchmark")
        torch.backends.cudnn.benchmark = args["fast"]
        torch.backends.cudnn.benchmark = (fast := True)
        torch.backends.cudnn.benchmark = (
            True
        )
        """,
        lines=(2, 3, 4, 5),
    ),
    Invalid(  # not a plain one-target assignment
        """\
        import torch
        fast = torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.benchmark |= fast
        torch.backends.cudnn.benchmark: bool = True
        """,
        lines=(2, 3, 4),
    ),
    Invalid(  # the file reads the flag back: the value assigned is data there
        """\
        import torch
        torch.backends.cudnn.benchmark = True
        print("benchmark:", torch.backends.cudnn.benchmark)
        """,
        lines=(2, 3),
    ),
    Invalid(  # `enabled` stays reported: turning cuDNN off works around a CUDA problem
        """\
        import torch
        torch.backends.cudnn.enabled = False
        x = 1
        """,
        lines=(2,),
    ),
    Invalid(  # portable code still runs on CUDA, where the flag acts
        """\
        import torch
        torch.backends.cudnn.benchmark = True
        x = 1
        """,
        options=(("target", "portable"),),
        lines=(2,),
    ),
    Valid(  # a suppression comment keeps the line and silences it
        """\
        import torch
        torch.backends.cudnn.benchmark = True  # npu-migrate: ignore[NPU161]
        x = 1
        """,
    ),
]
