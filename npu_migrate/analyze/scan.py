"""One pass over a file's `ast` tree that collects everything the three analyses need: CUDA code
locations, nn.Module classes and their layers, heavy operators, distributed set-up, collectives,
third-party CUDA code, AMP use, DataLoaders and training loops. Names are resolved through the
engine's import facts (`FileFacts.qualify`), so `import torch.nn as nn` and
`from torch.utils.data import DataLoader` are understood as the codemods understand them."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from codemods.model.astnodes import ast_dotted_parts as dotted
from codemods.model.facts import FileFacts
from npu_migrate.analyze import catalog
from npu_migrate.analyze.devices import HOST_FACTORIES, device_like
from npu_migrate.analyze.findings import Located
from npu_migrate.analyze.loops import LoopAnalysis, training_loops
from npu_migrate.analyze.model import FileScan, ModuleClass, Site

CUDA_DEVICE = re.compile(r"cuda(:\d+)?")
TORCH_CONTAINERS = frozenset({"Module", "Sequential", "ModuleList", "ModuleDict", "LightningModule"})
CHECKPOINT_CALLS = frozenset({"torch.utils.checkpoint.checkpoint",
                              "torch.utils.checkpoint.checkpoint_sequential"})
LOADER_CALL = re.compile(r"[lL]oader\w*\(")  # a call of something named like a loader (factory, subclass)
HOST_CALLS = frozenset({"cpu", "numpy", "tolist", "item"})


class Scanner:
    def __init__(self, path: str, text: str, tree: ast.Module, facts: FileFacts) -> None:
        self.path = path
        self.text = text
        self.lines = text.splitlines()
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
        self.loops: list[ast.stmt] = []
        self.backward_calls: list[ast.Call] = []

    # -- the walk ------------------------------------------------------------------------------
    def run(self) -> FileScan:
        # one handler per node type (a dict lookup per node: the walk is the hot loop of analyze)
        handlers: dict[type[ast.AST], Callable[[Any], None]] = {ast.Call: self._call, ast.Attribute: self._attribute, ast.Import: self._import,
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
        self._loaders()
        if self.backward_calls:
            for loop in training_loops(self.loops, self.backward_calls):
                LoopAnalysis(self.scan, self.qualify, self.lines).run(loop)
        return self.scan

    def _loaders(self) -> None:
        if "DataLoader" not in self.text and "Sampler" not in self.text and not LOADER_CALL.search(self.text):
            return
        from npu_migrate.analyze.loaders import LoaderScan

        found = LoaderScan(self.tree, self.qualify, self.lines, catalog.load("dataloader")["positional"]).run()
        self.scan.dataloaders = found["loaders"]
        self.scan.loader_candidates = found["candidates"]
        self.scan.loader_classes = found["classes"] + found["sampler_classes"]
        self.scan.loader_factories = found["factories"]
        self.scan.samplers = found["samplers"]

    def qualify(self, node: ast.AST) -> str | None:
        parts = dotted(node)
        return self.facts.qualify(parts) if parts else None

    def site(self, kind: str, node: Located, what: str) -> None:
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
        if name in CHECKPOINT_CALLS:
            self.scan.checkpointing = True
        elif name.startswith("torch.distributed."):
            self._distributed_call(node, name)
        if name in self.amp_calls or name.startswith("torch.cuda.amp."):
            self.scan.amp.append((name, node.lineno))
            self._amp_strings(node)
            if name.endswith("autocast"):
                self._autocast(node)
        setup = catalog.distributed_calls().get(name)
        if setup is not None:
            kind = setup["kind"]
            if kind == "process group" and self._backend_per_device(node):
                kind = "process group (backend per device)"
            self.scan.distributed.append((kind, name, node.lineno))
        entry = catalog.third_party_calls().get(name)
        if entry is not None and (entry.get("when") != "cuda_sources" or _mentions_cuda_sources(node)):
            self.scan.third_party.append((entry["cuda"], name.rsplit(".", 1)[-1], node.lineno))

    @staticmethod
    def kinds_methods() -> dict[str, str]:
        return catalog.load("operators")["tensor_methods"]

    def _backend_per_device(self, node: ast.Call) -> bool:
        """`init_process_group(backend=b)` where b comes from get_default_backend_for_device."""
        backend = next((k.value for k in node.keywords if k.arg == "backend"), node.args[0] if node.args else None)
        if backend is None:
            return False
        text = ast.unparse(backend)
        if "get_default_backend_for_device" in text:
            return True
        return type(backend) is ast.Name and re.search(
            rf"\b{re.escape(backend.id)}\s*=\s*[\w.]*get_default_backend_for_device\(", self.text) is not None

    def _distributed_call(self, node: ast.Call, name: str) -> None:
        short = name[len("torch.distributed."):]
        if short in catalog.collectives():
            self.scan.collectives.append((short, node.lineno))

    def _autocast(self, node: ast.Call) -> None:
        """(line, dtype, device) of an autocast: dtype None means the default (fp16 on CUDA and NPU)."""
        enabled = next((k.value for k in node.keywords if k.arg == "enabled"), None)
        if type(enabled) is ast.Constant and enabled.value is False:  # a region that turns AMP off
            return
        dtype = next((ast.unparse(k.value) for k in node.keywords if k.arg == "dtype"), None)
        device = next((k.value for k in node.keywords if k.arg == "device_type"), node.args[0] if node.args else None)
        device_text = device.value if type(device) is ast.Constant else (ast.unparse(device) if device else None)
        self.scan.autocasts.append((node.lineno, dtype, device_text))

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
        if (func.attr == "cuda" or device_like(node)) and _moved_already(func.value):
            from npu_migrate.analyze.findings import finding, seen

            self.scan.findings.append(finding(
                "ANA048", self.path, node,
                "the expression is copied to the device twice: the second copy is redundant (drop one)",
                evidence=[seen("repeated device copy", self.lines, node.lineno)]))
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
            after = inner.value if isinstance(inner, ast.Attribute) else getattr(inner, "value", None)
            if not isinstance(after, ast.expr):
                return
            receiver = after

    def _finding_round_trip(self, node: ast.Call, host: str) -> None:
        from npu_migrate.analyze.findings import finding, seen

        self.scan.findings.append(finding(
            "ANA043", self.path, node,
            f"device → host (`.{host}()`) → device round trip in one expression: keep the tensor on "
            "the NPU (each leg is a copy and a synchronisation)",
            evidence=[seen("round trip", self.lines, node.lineno)]))

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

    def _module_used(self, module: str, node: ast.stmt) -> None:
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
            language = catalog.kernel_language(name) if name else None
            if language is not None:
                self.scan.third_party.append((language["cuda"], f"@{name} kernel `{node.name}`", node.lineno))
                return

    def _binop(self, node: ast.BinOp) -> None:
        if type(node.op) is ast.MatMult:
            self.scan.ops.append(("@", node.lineno, node.col_offset + 1))

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
        from npu_migrate.analyze.blocks import StackScan, has_parameters, layer_width

        containers = []  # ModuleList / Sequential calls: candidates for stacks of repeated blocks
        for child in ast.walk(node):
            if type(child) is not ast.Call:
                continue
            parts = dotted(child.func)
            if not parts:
                continue
            name = self.facts.qualify(parts)
            if parts[-1] in ("ModuleList", "Sequential"):
                containers.append(child)
            entry = self.ops.get(name) if name else None
            if entry is not None and entry.get("layer"):
                record.layers.append((entry["layer"], parts[-1], child.lineno))
                record.layer_parameters.append((parts[-1], has_parameters(entry, parts[-1])))
                width = layer_width(child, entry)
                if width:
                    record.widths.append(width)
            elif name in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                record.own_parameters = True
            elif name and name.startswith("torch.nn.") and parts[-1][:1].isupper() \
                    and parts[-1] not in ("ModuleList", "Sequential", "ModuleDict"):
                record.layer_parameters.append((parts[-1], has_parameters(None, parts[-1])))
            elif parts[-1][:1].isupper() and (name is None or not name.startswith("torch.")):
                record.submodules.append((parts[-1], child.lineno))
        if containers:
            record.stacks = StackScan(node, self.qualify, self.lines, self.ops).stacks(containers)
        record.repeated = record.stacks[0]["line"] if record.stacks else 0


def _moved_already(node: ast.AST) -> bool:
    """Whether `node` is itself a device copy (`x.cuda()`, `x.to(device)`), maybe after other methods."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute:
        if node.func.attr == "cuda" or (node.func.attr == "to" and device_like(node)):
            return True
        if node.func.attr not in ("float", "half", "contiguous", "bfloat16", "long", "int"):
            return False
        node = node.func.value
    return False

def _mentions_cuda_sources(node: ast.Call) -> bool:
    for child in ast.walk(node):
        if type(child) is ast.Constant and type(child.value) is str and ".cu" in child.value:
            return True
        if type(child) is ast.keyword and child.arg in ("cuda_sources", "extra_cuda_cflags"):
            return True
    return False
