"""NPU420 `memory-snapshot`: memory-history recording switched on by an environment variable,
and step boundaries in each training loop.

Opt-in. At the program entry (the `if __name__ == "__main__":` block) it inserts

    if os.environ.get("NPU_MIGRATE_SNAPSHOT"):
        torch_npu.npu.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000)
        atexit.register(torch_npu.npu.memory._dump_snapshot, <path>)

so that ordinary runs pay nothing, and the dump happens at exit, after an exception too. Each
training loop gets a `torch.profiler.record_function("ProfilerStep#N")` marker at the top of its
body: the snapshot's `external_annotations` then carry the step boundaries `npu-migrate memory`
splits on. torch_npu's signature (no legacy bool form, no `clear_history`) is the one used.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

import libcst as cst

from codemods.analyses.loops import Site, find_training_steps, insertion_data
from codemods.analyses.portable import device_name, require_device
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.model.cstnodes import code_of
from npu_migrate.core.diagnostics import Severity

COUNTER = "npu_migrate_step"
MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")
PROFILER_IN_USE = re.compile(r"ProfilerStep|profiler\.profile\b")


class InsertMemorySnapshot(Rule):
    """## What it does

    At the program entry, record the NPU memory history when `NPU_MIGRATE_SNAPSHOT` is set and dump it at exit (also after an exception); mark each training iteration with a `ProfilerStep#N` annotation.

    Opt-in: `npu-migrate apply --enable memory-snapshot`.

    ## Why

    `npu-migrate memory` explains out-of-memory errors, leaks and fragmentation from a memory
    snapshot, and a snapshot needs the allocator's history recorded from the start of the run. The
    inserted hooks cost nothing unless the variable is set, so they can stay in the code:

    ```bash
    NPU_MIGRATE_SNAPSHOT=snap_{rank}.pickle python train.py      # {rank} becomes $RANK (default 0)
    npu-migrate memory snap_0.pickle
    ```

    The call uses torch_npu's own signature (Ascend/pytorch `torch_npu/npu/memory.py`):
    `_record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000)`
    — no legacy bool form and none of the upstream-only keywords (`clear_history`, ...), which torch_npu
    rejects with a `TypeError`. `stacks="python"` skips the costly C++ unwinding; `max_entries` bounds
    the ring buffer (100000 events, PyTorch's own recommendation). The dump is registered with
    `atexit`, so it also runs when the training raises or calls `sys.exit`; it runs before
    torch_npu's own shutdown handler (registered earlier, at import). It does not run when the process
    is killed by a signal.

    Each training loop (a loop holding a training step, see NPU400) gets, as the first statement of
    its body, `with torch.profiler.record_function(f"ProfilerStep#{i}"): pass` — a zero-length
    annotation whose start marks the step boundary. In snapshots that carry `external_annotations`
    (CUDA-style snapshots), `npu-migrate memory` splits steps on `ProfilerStep#N`. The loop's
    `enumerate` index is used when there is one; otherwise the loop is wrapped in
    `enumerate(...)` with the index `npu_migrate_step` (a `while` loop gets a counter initialised at
    the top of the block holding the outermost loop; a `while` loop at the top level of a script gets
    no marker). The marker costs one `record_function` enter/exit per step.

    Note: the snapshots of current torch_npu releases have no `external_annotations` (only `segments`
    and `device_traces`: Ascend/pytorch `torch_npu/npu/memory.py`, `_snapshot`); for them `npu-migrate memory` falls back to the
    repeating allocation pattern, or to `--step-frame`. The markers also show as ranges in the
    torch_npu profiler's timeline.

    The hooks go at the top of the first `if __name__ == "__main__":` block of a file that imports
    torch and trains or evaluates (it mentions `.backward(`, `DataLoader`, `optim`, `.train()`,
    `.eval()`, `no_grad` or `inference_mode`). A training file without such a block gets an info
    diagnostic: put the hooks where the program starts. Processes started with
    `torch.multiprocessing.spawn` do not run the `__main__` block: add the hooks to the worker
    function by hand there.

    ## Example

    ```python
    # before
    def train(model, loader, opt):
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        main()

    # after
    def train(model, loader, opt):
        for npu_migrate_step, (x, y) in enumerate(loader):
            with torch.profiler.record_function(f"ProfilerStep#{npu_migrate_step}"): pass  # step marker (npu-migrate)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        if os.environ.get("NPU_MIGRATE_SNAPSHOT"):  # memory snapshot (npu-migrate)
            torch_npu.npu.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=100000)
            atexit.register(torch_npu.npu.memory._dump_snapshot,
                os.environ["NPU_MIGRATE_SNAPSHOT"].replace("{rank}", os.environ.get("RANK", "0")))
        main()
    ```

    `import os`, `import atexit` and `import torch_npu` are added where missing (an existing
    `import torch_npu as tn` is used as `tn`; with only `from torch_npu... import ...`, the code uses
    `torch.npu.memory`, which torch_npu installs).

    ## Options

    - `snapshot_env`: the variable's name (default `NPU_MIGRATE_SNAPSHOT`).
    - `snapshot_max_entries`: the ring-buffer size (default 100000).

    ## Fix safety

    Safe: without the variable the program does exactly what it did (plus one zero-length profiler
    annotation per step). Files that already call `_record_memory_history` get no entry hooks; files
    that already have `ProfilerStep` annotations or use `torch.profiler.profile` get no markers.
    Applying twice inserts nothing the second time. Suppress with `# npu-migrate: ignore[NPU420]` on
    the `if __name__` line or on a loop's line.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix); opt-in
    - **portable**: the same hooks on the memory module of the file's device (`torch.get_device_module(DEVICE).memory`, whose `_record_memory_history` takes these keywords on CUDA and on torch_npu), run only where the device is `cuda` or `npu`; opt-in
    """

    code = "NPU420"
    supported_targets = frozenset({"npu", "portable"})
    name = "memory-snapshot"
    summary = ("Record NPU memory history when `NPU_MIGRATE_SNAPSHOT` is set, dump it at exit, and "
               "mark training steps")
    fix = Fix.SAFE  # inert unless the environment variable is set
    default = False
    severity = Severity.INFO
    prefilter = r"__name__|\.backward\("
    needs_torch_npu = True
    whole_statements = True  # the `__main__` block and whole training loops

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        # id(original block) -> [(statement, after the docstring?, (node, edit message) or None)]
        self.prepends: dict[int, list] = {}
        self.loops: dict[int, tuple] = {}  # id(original loop) -> (marker statement, note)
        self.no_entry_reported = False

    # -- file-level facts ------------------------------------------------------------------------
    @cached_property
    def settings(self) -> dict:
        data = dict(insertion_data()["snapshot"])
        options = self.context.options
        data["env"] = str(options.get("snapshot_env") or data["env"])
        data["max_entries"] = int(options.get("snapshot_max_entries") or data["max_entries"])
        return data

    @cached_property
    def applies(self) -> bool:
        """A torch program that trains or evaluates, and has no memory history of its own."""
        facts = self.context.facts
        uses_torch = any(t == "torch" or t.startswith("torch.") for t in facts.aliases.values())
        free_name = self.target != "portable" or device_name(self.context.source) is not None
        return uses_torch and free_name and bool(re.search(self.settings["entry_evidence"], self.context.source))

    @cached_property
    def main_guard_line(self) -> int | None:
        for stmt in self.context.facts.tree.body:
            if isinstance(stmt, ast.If) and MAIN_GUARD.fullmatch(ast.unparse(stmt.test).strip()):
                return stmt.lineno
        return None

    def local_name(self, module: str) -> str | None:
        for local, target in self.context.facts.aliases.items():
            if target == module:
                return local
        return None

    @cached_property
    def memory_api(self) -> str:
        """How the inserted code names torch_npu's memory module (under portable: the memory
        module of the file's device, `torch.get_device_module(DEVICE).memory`)."""
        if self.target == "portable":
            device = require_device(self.context)
            assert device is not None  # applies() is False otherwise
            return f"{self.torch_name}.get_device_module({device.value}).memory"
        npu = self.local_name("torch_npu")
        if npu:
            return f"{npu}.npu.memory"
        if any(t.startswith("torch_npu.") for t in self.context.facts.aliases.values()):
            return f"{self.torch_name}.npu.memory"  # torch_npu is loaded; `torch.npu` is its alias
        self.context.require_import("torch_npu")
        return "torch_npu.npu.memory"

    @cached_property
    def torch_name(self) -> str:
        name = self.local_name("torch")
        if name is None:
            self.context.require_import("torch")
        return name or "torch"

    # -- planning ------------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self.prepends, self.loops = {}, {}
        self.findings: list[tuple[cst.CSTNode, str]] = []
        if not self.applies:
            return
        self._plan_entry(node)
        steps = find_training_steps(node, self.resolve) if "backward(" in node.code else []
        if steps and self.main_guard_line is None and not self.no_entry_reported:
            self.no_entry_reported = True
            self.findings.append((steps[0].site.stmt, "no `if __name__ == \"__main__\":` block in "
                                  "this file: start the memory history where the program starts "
                                  "(`npu-migrate rules NPU420` shows the hooks)"))
        if PROFILER_IN_USE.search(self.context.source):
            return  # the markers are there already (or the profiler makes them)
        seen: set[int] = set()
        for step in steps:
            if step.loop is not None and id(step.loop.stmt) not in seen:
                seen.add(id(step.loop.stmt))
                self._plan_marker(node, step.loop, step.outer_loop)

    def _plan_entry(self, module: cst.Module) -> None:
        if self.main_guard_line is None or "_record_memory_history" in self.context.source:
            return
        for stmt in module.body:
            if (isinstance(stmt, cst.If)
                    and MAIN_GUARD.fullmatch(code_of(stmt.test).strip())
                    and self._is_first_guard(module, stmt)):
                if self._suppressed(module, [stmt]):
                    return
                if not isinstance(stmt.body, cst.IndentedBlock):
                    self.findings.append((stmt, "the `__main__` block is on one line: put its body "
                                                "on a line of its own to get the snapshot hooks"))
                    return
                env = self.settings["env"]
                note = (stmt, f"memory history recorded when `{env}` is set and "
                                           "dumped at exit (also after an exception)")
                self.prepends.setdefault(id(stmt.body), []).append(
                    (self._hooks(module.default_indent), False, note))
                return

    def _is_first_guard(self, module: cst.Module, stmt: cst.If) -> bool:
        from codemods.api.positions import node_positions

        line = node_positions(module, [stmt])[id(stmt)][0] + self.context.line_offset
        return line == self.main_guard_line

    def _hooks(self, indent: str) -> cst.BaseStatement:
        env, api = self.settings["env"], self.memory_api
        self.context.require_import("os")
        self.context.require_import("atexit")
        # portable: CUDA and torch_npu record a history; a CPU run has none to record
        device = ""
        if self.target == "portable":
            name = require_device(self.context)
            assert name is not None  # applies() is False otherwise
            device = f' and {name.value}.type in ("cuda", "npu")'
        text = (
            f'if os.environ.get("{env}"){device}:  # memory snapshot (npu-migrate)\n'
            f"{indent}{api}._record_memory_history(\n"
            f'{indent * 2}enabled="all", context="all", stacks="{self.settings["stacks"]}", '
            f'max_entries={self.settings["max_entries"]})\n'
            f"{indent}atexit.register({api}._dump_snapshot,\n"
            f'{indent * 2}os.environ["{env}"].replace("{{rank}}", os.environ.get("RANK", "0")))\n')
        return cst.parse_module(text, config=cst.PartialParserConfig(default_indent=indent)).body[0]

    def _plan_marker(self, module: cst.Module, loop: Site, outer: Site | None) -> None:
        """The marker and the loop-header change go in one edit of the loop statement, so they
        stand or fall together."""
        node = loop.stmt
        if not isinstance(node, (cst.For, cst.While)) or not isinstance(node.body, cst.IndentedBlock) \
                or self._suppressed(module, [node]):
            return
        counter = _enumerate_index(node)
        init_needed = counter is None and isinstance(node, cst.While)
        if init_needed and isinstance((outer or loop).block, cst.Module):
            return  # a `while` loop at the top level: no safe place for a counter
        counter = counter or COUNTER
        prefix = self.settings["step_marker"]
        call = f'{self.torch_name}.profiler.record_function(f"{prefix}{{{counter}}}")'
        body = f"{counter} += 1" if init_needed else "pass"
        marker = cst.parse_statement(f"with {call}: {body}  # step marker (npu-migrate)\n")
        self.loops[id(node)] = (marker, (node, f"step boundary `{prefix}N` marked "
                                                           "for memory snapshots"))
        if init_needed:
            top = outer or loop
            wanted = self.prepends.setdefault(id(top.block), [])
            if not any(item[2] is None for item in wanted):
                wanted.append((cst.parse_statement(f"{COUNTER} = 0\n"), True, None))

    def _suppressed(self, module: cst.Module, nodes: list[cst.CSTNode]) -> bool:
        suppressions = self.context.suppressions
        if not suppressions:
            return False
        from codemods.api.positions import node_positions

        where = node_positions(module, nodes)
        return any(suppressions.suppresses(self.code, line + self.context.line_offset)
                   for line, _ in where.values())

    # -- applying: only prepends, so other rules' edits of the same blocks do not matter ---------------
    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        wanted = self.prepends.get(id(original_node))
        if not wanted:
            return updated_node
        body = list(updated_node.body)
        for statement, after_docstring, note in reversed(wanted):
            at = 1 if after_docstring and body and _is_docstring(body[0]) else 0
            body.insert(at, statement)
            if note:
                self.fixed(*note)
        return updated_node.with_changes(body=body)

    def _leave_loop(self, original_node, updated_node):
        wanted = self.loops.get(id(original_node))
        if wanted is None:
            return updated_node
        marker, note = wanted
        self.fixed(*note)
        body = updated_node.body.with_changes(body=[marker, *updated_node.body.body])
        changes = {"body": body}
        if isinstance(updated_node, cst.For) and _enumerate_index(updated_node) is None:
            changes.update(_enumerated(updated_node))
        return updated_node.with_changes(**changes)

    leave_For = _leave_loop
    leave_While = _leave_loop

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        for node, message in self.findings:
            self.report(node, message)
        return updated_node


def _enumerated(loop: cst.For) -> dict:
    """`for batch in loader:` -> `for npu_migrate_step, batch in enumerate(loader):`."""
    target = loop.target
    if isinstance(target, cst.Tuple) and not target.lpar:
        target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    pair = cst.Tuple([cst.Element(cst.Name(COUNTER), comma=cst.Comma(
        whitespace_after=cst.SimpleWhitespace(" "))), cst.Element(target)], lpar=[], rpar=[])
    return {"target": pair, "iter": cst.Call(cst.Name("enumerate"), [cst.Arg(loop.iter)])}


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _enumerate_index(loop: cst.CSTNode) -> str | None:
    """`i` of `for i, batch in enumerate(loader):`."""
    if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
        return None
    func = loop.iter.func
    target = loop.target
    if (isinstance(func, cst.Name) and func.value == "enumerate" and isinstance(target, cst.Tuple)
            and target.elements and isinstance(target.elements[0].value, cst.Name)):
        return target.elements[0].value.value
    return None


CASES = [
    Invalid(
        """\
    import os
    import torch
    def train(model, loader, opt):
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        main()
""",
        after="""\
    import os
    import torch
    import torch_npu  # noqa: F401
    import atexit
    def train(model, loader, opt):
        for npu_migrate_step, (x, y) in enumerate(loader):
            with torch.profiler.record_function(f"ProfilerStep#{npu_migrate_step}"): pass  # step marker (npu-migrate)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        if os.environ.get("NPU_MIGRATE_SNAPSHOT"):  # memory snapshot (npu-migrate)
            torch_npu.npu.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=100000)
            atexit.register(torch_npu.npu.memory._dump_snapshot,
                os.environ["NPU_MIGRATE_SNAPSHOT"].replace("{rank}", os.environ.get("RANK", "0")))
        main()
""",
        codes=('NPU100', 'NPU420'),
    ),
    Valid(
        """\
    import os
    import torch
    import torch_npu  # noqa: F401
    import atexit
    def train(model, loader, opt):
        for npu_migrate_step, (x, y) in enumerate(loader):
            with torch.profiler.record_function(f"ProfilerStep#{npu_migrate_step}"): pass  # step marker (npu-migrate)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        if os.environ.get("NPU_MIGRATE_SNAPSHOT"):  # memory snapshot (npu-migrate)
            torch_npu.npu.memory._record_memory_history(
                enabled="all", context="all", stacks="python", max_entries=100000)
            atexit.register(torch_npu.npu.memory._dump_snapshot,
                os.environ["NPU_MIGRATE_SNAPSHOT"].replace("{rank}", os.environ.get("RANK", "0")))
        main()
""",
    ),
    Valid(
        """\
if __name__ == "__main__":
    print("hello")
""",
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
import torch
if __name__ == "__main__":
    print(torch.__version__)
""",
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
import torch
if __name__ == "__main__":
    torch.cuda.memory._record_memory_history()
    model.train()
""",
        with_rules=('NPU100',),
        path='train.py',
    ),
    Valid(
        """\
import torch
if __name__ == "__main__":  # npu-migrate: ignore[NPU420]
    model.train()
""",
        with_rules=('NPU100',),
        path='train.py',
    ),
    Invalid(
        """\
import torch
with torch.profiler.profile(schedule=s) as prof:
    for x in data:
        loss = model(x)
        loss.backward()
        opt.step()
        prof.step()
""",
        lines=(5,),
        with_rules=('NPU100',),
        path='train.py',
    ),
]
