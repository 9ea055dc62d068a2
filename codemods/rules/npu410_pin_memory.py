"""NPU410 `pin-memory`: pinned host memory and asynchronous copies for data loading.

Opt-in. `DataLoader(...)` without `pin_memory` gets `pin_memory=True` and, when it has workers,
`persistent_workers=True`; inside a loop over a loader that pins memory, the host→device copies
of the batch get `non_blocking=True`. A loader with no workers gets a diagnostic.

Which loop iterates a pinned loader is decided on the whole file (Python's `ast`, computed once,
`codemods/analyses/loadervalues.py`): names bound to a pinning `DataLoader(...)`, to a helper
that returns one (in this module, or in another one through the project index), or to a
function parameter that every visible call fills with one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cached_property

import libcst as cst

from codemods.analyses.loadervalues import (
    LOADER_INDEX_OPTION,
    PINNED_LOADER_HELPERS,
    PinnedLoaders,
    pinned_loaders,
)
from codemods.analyses.loops import (
    Site,
    append_elements,
    calls_in,
    insertion_data,
    method_name,
    target_names,
    walk,
)
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule, RuleContext
from codemods.model.cstnodes import code_of, dotted_parts, find_all, keyword
from npu_migrate.core.diagnostics import Severity


class InsertPinMemory(Rule):
    """## What it does

    `DataLoader(...)` without `pin_memory` gets `pin_memory=True` (and `persistent_workers=True` when it has workers); the host→device copies of its batches get `non_blocking=True`.

    Opt-in: `npu-migrate apply --enable pin-memory`, or with the tuning rules, `--enable tune` (docs/tune.md).

    ## Why

    A copy from pageable host memory to the NPU is synchronous and goes through a staging buffer.
    With `pin_memory=True` the loader returns page-locked batches, and a copy of a pinned tensor with
    `non_blocking=True` overlaps with the computation already queued on the device. Workers that
    persist between epochs save re-forking them (and re-importing the dataset) every epoch.

    What the rule does:

    - `DataLoader(...)` (resolved through imports: `torch.utils.data.DataLoader` under any alias)
      without `pin_memory` gets `pin_memory=True`. An explicit `pin_memory=...` is the user's choice
      and is kept. A call with `**kwargs` is left alone with an info note (the keyword may already be
      in there).
    - `num_workers` > 0 (a literal, or a module constant) and no `persistent_workers`: adds
      `persistent_workers=True`. When `num_workers` is a variable (`args.workers`), adds
      `persistent_workers=args.workers > 0` (a loader with no workers rejects `persistent_workers=True`).
    - `num_workers` missing or 0: an info diagnostic suggests workers.
    - In a `for` loop over a loader that pins memory (directly, through `enumerate`/`tqdm`/`iter`),
      `.to(device)`, `.npu()` and `.cuda()` calls on the batch (the loop variables, what is unpacked
      or indexed from them, dict comprehensions over them) get `non_blocking=True`. Copies of model
      outputs, copies to `"cpu"` and dtype conversions (`x.to(torch.float16)`) are not touched.

    Which loops iterate a pinning loader is decided on the whole file: names bound to a
    `DataLoader(...)` that pins, to a call of a helper whose every `return` is such a loader, or
    parameters that every visible call fills with one (`train(model, loader)` into
    `def train(model, train_loader)`); a loop may also iterate the helper's call directly
    (`for batch in self.train_dataloader():`), and one batch may be taken with
    `x, y = next(iter(loader))` (its copies later in the same block count). Helpers defined in another module of the project
    count too (`from data import build_loader`, `import data as d; d.build_loader()`, relative
    imports): `apply` indexes them over every discovered file before `--shard`/`--changed-since`
    narrow the set. A name also bound to anything else is not trusted.

    Loaders built with a custom `sampler`/`batch_sampler`, a `collate_fn` returning non-tensors, or
    an `IterableDataset` are handled the same way: pinning copies every tensor found in the batch
    (in tuples, lists, dicts, namedtuples) and returns anything else unchanged, so it is safe for
    them (tested with all three).

    ## Example

    ```python
    # before
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, num_workers=8)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = model(x)

    # after
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out = model(x)
    ```

    ## Fix safety

    Safe for the values computed: pinning and asynchronous host→device copies do not change results
    (the stream orders the copy before its use). Two behavioural notes: pinned batches use page-locked
    host memory (the loader's prefetch depth worth); with persistent workers, changes the main process
    makes to the dataset object after the first epoch are not seen by the workers (a dataset that
    changes its own content per epoch should set `persistent_workers=False` explicitly, and the rule
    keeps that). Suppress with `# npu-migrate: ignore[NPU410]` on the line.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix); opt-in
    - **portable**: the same insertion: `pin_memory=True` and `non_blocking=True` are device-generic (pinned for whichever accelerator the run has; a CPU-only build warns once and copies as before); opt-in
    """

    code = "NPU410"
    supported_targets = frozenset({"npu", "portable"})
    name = "pin-memory"
    summary = ("`DataLoader` gets `pin_memory=True` (and `persistent_workers=True` with workers); "
               "batch copies get `non_blocking=True`")
    fix = Fix.SAFE
    default = False
    families = ("tune",)  # `apply --enable tune` brings it in with NPU600-NPU629
    severity = Severity.INFO
    prefilter = r"DataLoader|\.(?:to|npu|cuda)\("
    project_facts = (PINNED_LOADER_HELPERS,)
    whole_statements = True  # a loop over a loader and the copies in its body

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.copies: set[int] = set()  # id(original Call) of batch copies to make non-blocking

    # -- DataLoader(...) ---------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if id(original_node) in self.copies:
            self.fixed(original_node, f"`.{method_name(original_node)}(...)` of the batch: "
                                      "added `non_blocking=True` (the loader pins memory)")
            return updated_node.with_changes(args=append_elements(
                list(updated_node.args), [keyword("non_blocking", cst.Name("True"))],
                updated_node.whitespace_before_args))
        if "DataLoader" not in self.context.source or \
                self.resolve(original_node.func) not in insertion_data()["dataloaders"]:
            return updated_node
        return self._loader(original_node, updated_node)

    def _loader(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        data = insertion_data()
        args = updated.args
        positional = [a for a in args if not a.keyword and not a.star]
        keywords = {a.keyword.value: a for a in args if a.keyword}
        splat = any(a.star == "**" for a in args)
        added: list[cst.Arg] = []
        if "pin_memory" not in keywords and len(positional) <= data["dataloader_pin_memory_position"]:
            if splat:
                self.report(original, "`DataLoader(**...)`: add `pin_memory=True` where the "
                            "keyword arguments are built", severity=Severity.INFO)
            else:
                added.append(keyword("pin_memory", cst.Name("True")))
        workers_at = data["dataloader_num_workers_position"]
        workers = keywords["num_workers"].value if "num_workers" in keywords else (
            positional[workers_at].value if len(positional) > workers_at else None)
        count = self._literal_int(workers)
        if (workers is None and not splat) or count == 0:
            self.report(original, "the loader has no workers (`num_workers` is 0): batches are "
                        "loaded in the training process; try `num_workers=4` or more (up to the "
                        "CPU cores per device) and measure", severity=Severity.INFO)
        elif "persistent_workers" not in keywords and not splat and workers is not None:
            if count is not None:
                added.append(keyword("persistent_workers", cst.Name("True")))
            elif dotted_parts(workers):
                added.append(keyword("persistent_workers", cst.Comparison(
                    workers, [cst.ComparisonTarget(cst.GreaterThan(), cst.Integer("0"))])))
        if not added:
            return updated
        text = ", ".join(code_of(a) for a in added)
        self.fixed(original, f"`DataLoader(...)`: added `{text}`")
        return updated.with_changes(args=append_elements(list(args), added,
                                                         updated.whitespace_before_args))

    def _literal_int(self, node: cst.CSTNode | None) -> int | None:
        if isinstance(node, cst.Integer):
            return int(node.value, 0)
        if isinstance(node, cst.Name):
            value = self.context.facts.constants.get(node.value)
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        return None

    # -- batch copies inside loops over pinned loaders ---------------------------------------------
    @cached_property
    def pinned(self) -> PinnedLoaders | None:
        """The loaders of this file that pin; helpers from other modules come from the project
        index (`codemods/analyses/loadervalues.py`)."""
        index = self.context.options.get(LOADER_INDEX_OPTION) or {}
        imported = index.get(os.path.abspath(self.context.path), ()) if index else ()
        if "DataLoader" not in self.context.source and not imported:
            return None
        found = pinned_loaders(self.context.facts.tree, self.context.facts.qualify, imported)
        return found if found.names or found.helpers or found.imported else None

    def visit_For(self, node: cst.For) -> None:
        # a one-line loop body holds no statement line whose calls could copy the batch
        if self.pinned is None or not isinstance(node.body, cst.IndentedBlock) or not _iterates(node.iter, self.pinned):
            return
        self._mark_copies(walk(node.body), target_names(node.target))

    def visit_Module(self, node: cst.Module) -> None:
        self._next_batches(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._next_batches(node)

    def _next_batches(self, block: cst.Module | cst.IndentedBlock) -> None:
        """`x, y = next(iter(loader))`: the copies of that batch later in the block."""
        if self.pinned is None:
            return
        for index, stmt in enumerate(block.body):
            batch = _next_batch(stmt, self.pinned)
            if batch:
                self._mark_copies(walk(block, start=index + 1), batch)

    def _mark_copies(self, sites: Iterable[Site], derived: set[str]) -> None:
        """Mark the batch copies among `sites`, following what stays the batch (`derived`)."""
        for site in sites:
            stmt = site.stmt
            for comp in find_all(stmt, cst.CompFor):
                if _root_names(comp.iter) & derived:
                    derived |= target_names(comp.target)
            # the calls of a statement see the names as they were before it binds any
            for call in calls_in(stmt) if not _compound(stmt) else []:
                if self._is_batch_copy(call, derived):
                    self.copies.add(id(call))
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for target in small.targets:
                            _bind(target.target, small.value, derived)

    def _is_batch_copy(self, call: cst.Call, derived: set[str]) -> bool:
        name = method_name(call)
        if name not in ("to", "npu", "cuda") or not isinstance(call.func, cst.Attribute):
            return False
        if not (_root_names(call.func.value, heads_only=True) & derived):
            return False
        if any(a.star or (a.keyword and a.keyword.value == "non_blocking") for a in call.args):
            return False
        positional = [a for a in call.args if not a.keyword]
        if len(positional) > 1:
            return False
        if name != "to":
            return True
        target = positional[0].value if positional else next(
            (a.value for a in call.args if a.keyword and a.keyword.value == "device"), None)
        return target is not None and self._device_like(target)

    def _device_like(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return isinstance(value, str) and not value.startswith("cpu")
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Call):
            return self.resolve(node.func) == "torch.device"
        parts = dotted_parts(node)
        if not parts or self.resolve(node) is not None:  # torch.float16 and the like
            return False
        return bool(re.search(insertion_data()["device_like_names"], parts[-1]))


def _bind(target: cst.BaseExpression, value: cst.BaseExpression, derived: set[str]) -> None:
    """`x = x.to(device)` keeps x the batch, `x = model(x)` makes it an output; a tuple assigned a
    tuple of the same length is followed element by element (`pred, y = pred.to(d), y.to(d)`)."""
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(value.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in [*target.elements, *value.elements]):
        for name, part in zip(target.elements, value.elements):
            _bind(name.value, part.value, derived)
        return
    names = target_names(target)
    if _derives(value, derived):
        derived |= names
    else:
        derived -= names


def _next_batch(stmt: cst.CSTNode, pinned: PinnedLoaders) -> set[str]:
    """The names `x, y = next(iter(loader))` binds, when the loader pins."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign)):
        return set()
    value = stmt.body[0].value
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "next"
            and value.args and _iterates(value.args[0].value, pinned)):
        return set()
    return set().union(*(target_names(t.target) for t in stmt.body[0].targets))


def _compound(stmt: cst.CSTNode) -> bool:
    return not isinstance(stmt, cst.SimpleStatementLine)


def _root_names(node: cst.CSTNode, heads_only: bool = False) -> set[str]:
    if heads_only:
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        return {node.value} if isinstance(node, cst.Name) else set()
    return {n.value for n in find_all(node, cst.Name)}


def _derives(value: cst.CSTNode, derived: set[str]) -> bool:
    """The value is (parts of) the batch: names, subscripts, attributes and copies of it."""
    if not (_root_names(value) & derived):
        return False
    return all(method_name(c) in insertion_data()["transfer_methods"]
               + insertion_data()["container_methods"] for c in calls_in(value))


def _iterates(expr: cst.CSTNode, pinned: PinnedLoaders) -> bool:
    """A loop over a pinning loader: a name bound to one, a call of a helper returning one
    (`for batch in make_loader(ds)`, `self.train_dataloader()`, an imported `data.build_loader()`),
    through `enumerate`/`tqdm`/`iter`."""
    if isinstance(expr, cst.Call):
        parts = dotted_parts(expr.func)
        if not parts:
            return False
        name = ".".join(parts)
        if name in insertion_data()["loader_wrappers"]:
            return bool(expr.args) and _iterates(expr.args[0].value, pinned)
        return name in pinned.imported or parts[-1] in pinned.helpers
    parts = dotted_parts(expr)
    return bool(parts) and parts is not None and parts[-1] in pinned.names


CASES = [
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader


def train(model, data, optimizer, device):
    loader = DataLoader(data, batch_size=32)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = model(x, y)
        loss.backward()
        optimizer.step()
""",
        after="""\
import torch
from torch.utils.data import DataLoader


def train(model, data, optimizer, device):
    loader = DataLoader(data, batch_size=32, pin_memory=True)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = model(x, y)
        loss.backward()
        optimizer.step()
""",
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, batch_size=8)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, batch_size=8, pin_memory=True)
""",
        lines=(3,),
        path='data.py',
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, batch_size=8, num_workers=4)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, batch_size=8, num_workers=4, pin_memory=True, persistent_workers=True)
""",
        path='data.py',
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
WORKERS = 2
dl = DataLoader(
    ds,
    num_workers=WORKERS,
)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
WORKERS = 2
dl = DataLoader(
    ds,
    num_workers=WORKERS,
    pin_memory=True,
    persistent_workers=True,
)
""",
        path='data.py',
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
dl = torch.utils.data.DataLoader(ds, num_workers=args.workers)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
dl = torch.utils.data.DataLoader(ds, num_workers=args.workers, pin_memory=True, persistent_workers=args.workers > 0)
""",
        path='data.py',
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, 8, True, None, None, 3)
d2 = DataLoader(ds, pin_memory=False)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, 8, True, None, None, 3, pin_memory=True, persistent_workers=True)
d2 = DataLoader(ds, pin_memory=False)
""",
        lines=(4,),
        path='data.py',
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=False)
for step, batch in enumerate(loader):
    x, y = batch
    x = x.to(device)
    y = y.npu()
    z = batch[2].to("npu:0", dtype=torch.float16)
    out = model(x)
    out.to("cpu")
    out.to(device)
    x.to(torch.float16)
    y = model(y)
    y = y.to(host_device)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=False, pin_memory=True)
for step, batch in enumerate(loader):
    x, y = batch
    x = x.to(device, non_blocking=True)
    y = y.npu(non_blocking=True)
    z = batch[2].to("npu:0", dtype=torch.float16, non_blocking=True)
    out = model(x)
    out.to("cpu")
    out.to(device)
    x.to(torch.float16)
    y = model(y)
    y = y.to(host_device)
""",
        path='data.py',
    ),
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader
def make_loader(ds):
    return DataLoader(ds, batch_size=4, num_workers=2)

def train(model, train_loader):
    for batch in train_loader:
        batch = {k: v.to(model.device) for k, v in batch.items()}

def main():
    loader = make_loader(ds)
    train(net, loader)
""",
        after="""\
import torch
from torch.utils.data import DataLoader
def make_loader(ds):
    return DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, persistent_workers=True)

def train(model, train_loader):
    for batch in train_loader:
        batch = {k: v.to(model.device, non_blocking=True) for k, v in batch.items()}

def main():
    loader = make_loader(ds)
    train(net, loader)
""",
        path='data.py',
    ),
    Valid(
        """\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)
""",
        path='data.py',
    ),
    Valid(
        """\
import torch
from torch.utils.data import DataLoader
dl = DataLoader(ds, pin_memory=False, num_workers=1, persistent_workers=True)
for x in dl:
    x = x.to(device)
""",
        path='data.py',
    ),
    Valid(
        """\
import torch
from torch.utils.data import DataLoader
def run(dl):
    for x in dl:
        x.to(device)
run(DataLoader(ds, pin_memory=True, num_workers=1, persistent_workers=True))
run(other_batches)
""",
        path='data.py',
    ),
    Valid(
        """\
import torch
from torch.utils.data import DataLoader
from mylib import DataLoader as DL
dl = DL(ds)
""",
        path='data.py',
    ),
    # a helper that returns a loader: the loader is pinned where it is built, the copies where it is iterated
    Invalid(
        """\
import torch
from torch.utils.data import DataLoader


def make_loader(data):
    return DataLoader(data, batch_size=32, num_workers=2)


def train(model, data, device):
    for x, y in make_loader(data):
        model(x.to(device), y.to(device)).backward()
""",
        after="""\
import torch
from torch.utils.data import DataLoader


def make_loader(data):
    return DataLoader(data, batch_size=32, num_workers=2, pin_memory=True, persistent_workers=True)


def train(model, data, device):
    for x, y in make_loader(data):
        model(x.to(device, non_blocking=True), y.to(device, non_blocking=True)).backward()
""",
    ),
    # a loader tuned already (pinned, persistent workers, asynchronous copies): nothing to add
    Valid(
        """\
import torch
from torch.utils.data import DataLoader


def train(model, data, device):
    loader = DataLoader(data, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
    for x, y in loader:
        model(x.to(device, non_blocking=True), y.to(device, non_blocking=True)).backward()
""",
    ),
]
