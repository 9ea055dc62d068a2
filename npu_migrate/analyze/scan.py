"""One pass over a file's `ast` tree that collects everything the three analyses need: CUDA code
locations, nn.Module classes and their layers, heavy operators, distributed set-up, collectives,
third-party CUDA code, AMP use, DataLoaders and training loops. Names are resolved through the
engine's import facts (`FileFacts.qualify`), so `import torch.nn as nn` and
`from torch.utils.data import DataLoader` are understood as the codemods understand them."""

from __future__ import annotations

import ast
import re
from typing import Any

from npu_migrate.analyze import catalog
from npu_migrate.analyze.model import FileScan, ModuleClass, Site
from codemods.framework.facts import FileFacts, ast_dotted_parts as dotted

CUDA_DEVICE = re.compile(r"cuda(:\d+)?")
TORCH_CONTAINERS = frozenset({"Module", "Sequential", "ModuleList", "ModuleDict", "LightningModule"})
CHECKPOINT_CALLS = frozenset({"torch.utils.checkpoint.checkpoint",
                              "torch.utils.checkpoint.checkpoint_sequential"})
DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
HOST_CALLS = frozenset({"cpu", "numpy", "tolist", "item"})
HOST_FACTORIES = frozenset({"torch.tensor", "torch.from_numpy", "torch.as_tensor", "torch.Tensor"})




def literal(node: ast.AST | None) -> Any:
    """A literal's value, or the expression's source for anything else."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    return ast.unparse(node)


class Scanner:
    def __init__(self, path: str, text: str, tree: ast.Module, facts: FileFacts) -> None:
        self.path = path
        self.tree = tree
        self.facts = facts
        self.scan = FileScan(path)
        self.ops = catalog.operators()
        self.kinds = catalog.load("cuda_kinds")
        self.amp_calls = frozenset(self.kinds["amp_calls"])
        self.env_prefixes = tuple(self.kinds["env_prefixes"])
        self.consumed: set[int] = set()
        self.cuda_text = "cuda" in text or "nccl" in text or "CUDA" in text or "NCCL" in text
        # local names bound to torch.cuda things by `from torch.cuda... import x`
        self.cuda_names = {local: target for local, target in facts.aliases.items()
                           if target.startswith("torch.cuda.")} if self.cuda_text else {}
        self.class_nodes: list[ast.ClassDef] = []
        self.loops: list[ast.AST] = []
        self.backward_calls: list[ast.Call] = []

    # -- the walk ------------------------------------------------------------------------------
    def run(self) -> FileScan:
        handlers = {ast.Call: self._call, ast.Attribute: self._attribute, ast.Import: self._import,
                    ast.ImportFrom: self._import_from, ast.ClassDef: self.class_nodes.append,
                    ast.For: self.loops.append, ast.While: self.loops.append,
                    ast.AsyncFor: self.loops.append, ast.FunctionDef: self._function,
                    ast.BinOp: self._binop}
        if self.cuda_text:
            handlers[ast.Constant] = self._constant
            if self.cuda_names:
                handlers[ast.Name] = self._name
        get = handlers.get
        for node in ast.walk(self.tree):
            handler = get(type(node))
            if handler is not None:
                handler(node)
        for node in self.class_nodes:
            self._class(node)
        if self.backward_calls:
            from npu_migrate.analyze.loops import LoopAnalysis, training_loops

            for loop in training_loops(self.loops, self.backward_calls):
                LoopAnalysis(self.scan, self.qualify).run(loop)
        return self.scan

    def qualify(self, node: ast.AST) -> str | None:
        parts = dotted(node)
        return self.facts.qualify(parts) if parts else None

    def site(self, kind: str, node: ast.AST, what: str) -> None:
        self.scan.sites.append(Site(kind, node.lineno, node.col_offset + 1, what))

    # -- handlers ------------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> None:
        func = node.func
        if type(func) is ast.Attribute:
            attr = func.attr
            if attr == "backward":
                self.backward_calls.append(node)
            elif attr in ("cuda", "to"):
                self._transfer(node, func)
        name = self.qualify(func)
        if name is None:
            if type(func) is ast.Attribute:
                method = self.kinds_methods().get(func.attr)
                if method:
                    self.scan.ops.append((method, node.lineno, node.col_offset + 1))
            return
        if name in self.ops:
            self.scan.ops.append((name, node.lineno, node.col_offset + 1))
        if name in DATALOADER:
            self._dataloader(node)
        elif name in CHECKPOINT_CALLS:
            self.scan.checkpointing = True
        elif name.startswith("torch.distributed."):
            self._distributed_call(node, name)
        if name in self.amp_calls or name.startswith("torch.cuda.amp."):
            self.scan.amp.append((name, node.lineno))
            self._amp_strings(node)
        setup = catalog.distributed_calls().get(name)
        if setup is not None:
            self.scan.distributed.append((setup["kind"], name, node.lineno))
        entry = catalog.third_party_calls().get(name)
        if entry is not None and (not entry.get("only_with_cu") or _mentions_cuda_sources(node)):
            self.scan.third_party.append((entry["cuda"], name.rsplit(".", 1)[-1], node.lineno))

    @staticmethod
    def kinds_methods() -> dict[str, str]:
        return catalog.load("operators")["tensor_methods"]

    def _distributed_call(self, node: ast.Call, name: str) -> None:
        short = name[len("torch.distributed."):]
        if short in catalog.collectives():
            self.scan.collectives.append((short, node.lineno))

    def _amp_strings(self, node: ast.Call) -> None:
        """`torch.autocast('cuda')` is an AMP location, not a device-placement one."""
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if type(arg) is ast.Constant and type(arg.value) is str and CUDA_DEVICE.fullmatch(arg.value):
                self.consumed.add(id(arg))
                self.site("AMP", node, f"{ast.unparse(node.func)}({arg.value!r})")

    def _transfer(self, node: ast.Call, func: ast.Attribute) -> None:
        if func.attr == "cuda" and self.qualify(func) is None:
            self.consumed.add(id(func))
            self.site("device placement", node, "`.cuda()`")
        # a device copy of something just brought to the host is a round trip
        receiver = func.value
        while isinstance(receiver, (ast.Call, ast.Attribute, ast.Subscript)):
            inner = receiver.func if type(receiver) is ast.Call else receiver
            if type(inner) is ast.Attribute and inner.attr in HOST_CALLS and type(receiver) is ast.Call:
                if func.attr == "cuda" or device_like(node):
                    self._finding_round_trip(node, inner.attr)
                return
            if type(receiver) is ast.Call and receiver.args and self.qualify(inner) in HOST_FACTORIES:
                receiver = receiver.args[0]  # torch.tensor(x.cpu().numpy()) copies what it is given
                continue
            receiver = inner.value if type(inner) is ast.Attribute else getattr(inner, "value", None)

    def _finding_round_trip(self, node: ast.Call, host: str) -> None:
        from npu_migrate.analyze.findings import finding

        self.scan.findings.append(finding(
            "ANA043", self.path, node,
            f"device → host (`.{host}()`) → device round trip in one expression: keep the tensor on "
            "the NPU (each leg is a copy and a synchronisation)"))

    def _attribute(self, node: ast.Attribute) -> None:
        if id(node) in self.consumed:
            return
        if node.attr == "is_cuda":
            self.site("device placement", node, "`.is_cuda`")
            return
        if not self.cuda_text:
            return
        parts = dotted(node)
        if parts is None:
            return
        name = self.facts.qualify(parts)
        if name is None:
            return
        kind = self._cuda_kind(name)
        if kind is None:
            return
        inner = node.value
        while type(inner) is ast.Attribute:
            self.consumed.add(id(inner))
            inner = inner.value
        self.site(kind, node, f"`{name}`")

    def _cuda_kind(self, name: str) -> str | None:
        if name == "torch.cuda" or name.startswith("torch.cuda."):
            if name.startswith("torch.cuda.amp"):
                return "AMP"
            if name.startswith(("torch.cuda.nccl", "torch.cuda.comm")):
                return "distributed"
            return "torch.cuda API"
        if name in self.kinds["distributed_names"]:
            return "distributed"
        if name.startswith(tuple(self.kinds["other_prefixes"])):
            return "other CUDA API"
        return None

    def _name(self, node: ast.Name) -> None:
        target = self.cuda_names.get(node.id)
        if target is not None:
            self.site(self._cuda_kind(target) or "torch.cuda API", node, f"`{target}`")

    def _constant(self, node: ast.Constant) -> None:
        value = node.value
        if type(value) is not str or len(value) > 48 or id(node) in self.consumed:
            return
        if CUDA_DEVICE.fullmatch(value):
            self.site("device placement", node, f"{value!r}")
        elif value in ("nccl", "cuda:nccl"):
            self.site("distributed", node, f"backend {value!r}")
        elif value.startswith(self.env_prefixes) and value.replace("_", "").isalnum() and value.isupper():
            self.site("environment", node, f"{value}")

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module_used(alias.name, node)

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        self._module_used(node.module, node)
        if node.module.startswith("torch.utils.checkpoint"):
            self.scan.checkpointing = True
        if node.module.startswith("torch.cuda"):
            self.site(self._cuda_kind(node.module) or "torch.cuda API", node, f"`from {node.module} import …`")

    def _module_used(self, module: str, node: ast.AST) -> None:
        entry = catalog.match_prefix(module, catalog.third_party_modules())
        if entry is not None:
            self.scan.third_party.append((entry["cuda"], f"import {module}", node.lineno))
        setup = catalog.match_prefix(module, catalog.distributed_modules())
        if setup is not None:
            self.scan.distributed.append((setup["kind"], module, node.lineno))
        if module == "torch.utils.checkpoint":
            self.scan.checkpointing = True

    def _function(self, node: ast.FunctionDef) -> None:
        if node.name == "rotate_half":
            from npu_migrate.analyze.fusion import fusion_finding

            self.scan.findings.append(fusion_finding(self.path, node, "rotary"))
        for decorator in node.decorator_list:
            target = decorator.func if type(decorator) is ast.Call else decorator
            name = self.qualify(target)
            if name and name.startswith("triton."):
                self.scan.third_party.append(("triton", f"@{name} kernel `{node.name}`", node.lineno))
                return

    def _binop(self, node: ast.BinOp) -> None:
        if type(node.op) is ast.MatMult:
            self.scan.ops.append(("@", node.lineno, node.col_offset + 1))

    def _dataloader(self, node: ast.Call) -> None:
        spec = catalog.load("dataloader")
        settings: dict[str, Any] = {}
        for name, arg in zip(spec["positional"], node.args):
            if type(arg) is not ast.Starred:
                settings[name] = literal(arg)
        for keyword in node.keywords:
            if keyword.arg:
                settings[keyword.arg] = literal(keyword.value)
        self.scan.dataloaders.append({"line": node.lineno, "col": node.col_offset + 1,
                                      "settings": settings,
                                      "unpacked": any(k.arg is None for k in node.keywords)})

    # -- classes -------------------------------------------------------------------------------
    def _class(self, node: ast.ClassDef) -> None:
        bases, is_torch = [], False
        for base in node.bases:
            parts = dotted(base)
            if not parts:
                continue
            bases.append(parts[-1])
            name = self.facts.qualify(parts) or ""
            if parts[-1] in TORCH_CONTAINERS and (name.startswith(("torch.", "lightning", "pytorch_lightning"))
                                                  or parts[0] in ("nn", "torch")):
                is_torch = True
        record = ModuleClass(node.name, node.lineno, bases, is_torch)
        # only classes that could be modules are worth a second look at their bodies
        if is_torch or bases:
            self._layers(node, record)
            from npu_migrate.analyze.fusion import ClassFusion

            self.scan.findings += ClassFusion(self.path, self.qualify).analyze(node)
        self.scan.classes.append(record)

    def _layers(self, node: ast.ClassDef, record: ModuleClass) -> None:
        for child in ast.walk(node):
            if type(child) is not ast.Call:
                continue
            parts = dotted(child.func)
            if not parts:
                continue
            name = self.facts.qualify(parts)
            entry = self.ops.get(name) if name else None
            if entry is not None and entry.get("layer"):
                record.layers.append((entry["layer"], parts[-1], child.lineno))
            elif name and name.rsplit(".", 1)[-1] in ("ModuleList", "Sequential") and name.startswith("torch."):
                if any(isinstance(a, (ast.ListComp, ast.GeneratorExp)) or
                       (type(a) is ast.Starred and isinstance(a.value, ast.ListComp)) for a in child.args):
                    record.repeated = record.repeated or child.lineno
            elif parts[-1][:1].isupper() and (name is None or not name.startswith("torch.")):
                record.submodules.append((parts[-1], child.lineno))


def device_like(node: ast.Call) -> bool:
    """`.to(x)` whose argument looks like a device (not a dtype)."""
    for arg in [*node.args[:1], *(k.value for k in node.keywords if k.arg == "device")]:
        if type(arg) is ast.Constant and isinstance(arg.value, (str, int)):
            return isinstance(arg.value, int) or "cuda" in arg.value or "npu" in arg.value
        text = ast.unparse(arg).lower()
        if "dev" in text or "cuda" in text or "rank" in text:
            return True
    return False


def _mentions_cuda_sources(node: ast.Call) -> bool:
    for child in ast.walk(node):
        if type(child) is ast.Constant and type(child.value) is str and ".cu" in child.value:
            return True
        if type(child) is ast.keyword and child.arg in ("cuda_sources", "extra_cuda_cflags"):
            return True
    return False
