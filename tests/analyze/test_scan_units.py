"""Behaviour of the scanner, loop analysis and fusion detection on small snippets."""
import ast
import textwrap

from codemods.model.facts import FileFacts
from npu_migrate.analyze import catalog
from npu_migrate.analyze.aggregate import Aggregator
from npu_migrate.analyze.scan import Scanner


def scan(source: str, path: str = "x.py"):
    text = textwrap.dedent(source)
    tree = ast.parse(text)
    return Scanner(path, text, tree, FileFacts.from_tree(tree)).run()


def codes(result):
    return sorted((d.code, d.line) for d in result.findings)


LOOP = """
import torch
def train(model, loader, opt):
    total = 0
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = (out - y).pow(2).mean()
        loss.backward()
        opt.step()
        {body}
"""


def test_detached_accumulation_is_no_leak():
    for body in ("total += loss.item()", "total += loss.detach()", "total += float(loss)",
                 "history.append(loss.item())", "history.append(loss.detach().cpu())"):
        found = [c for c in codes(scan(LOOP.format(body=body))) if c[0] == "ANA044"]
        assert found == [], body


def test_graph_keeping_accumulation_is_a_leak():
    for body in ("total += loss", "total = total + loss", "history.append(loss)", "outputs.append(out)",
                 "history.append(loss * 2)"):
        found = [c for c in codes(scan(LOOP.format(body=body))) if c[0] == "ANA044"]
        assert found == [("ANA044", 10)], body


def test_periodic_sync_is_info_and_every_step_sync_is_warning():
    periodic = scan(LOOP.format(body="if step % 10 == 0: print(loss.item())"))
    every = scan(LOOP.format(body="print(loss.detach().cpu().numpy())"))
    assert [(d.code, d.severity.value) for d in periodic.findings if d.code == "ANA041"] == [("ANA041", "info")]
    # one chain, one finding
    assert [(d.code, d.severity.value) for d in every.findings if d.code == "ANA041"] == [("ANA041", "warning")]


def test_accumulation_detected():
    text = LOOP.replace("        opt.step()\n", "        if step % 4 == 0:\n            opt.step()\n")
    result = scan(text.format(body="pass"))
    assert result.accumulation and not [c for c in codes(result) if c[0] == "ANA046"]
    assert [c for c in codes(scan(LOOP.format(body="pass"))) if c[0] == "ANA046"] == [("ANA046", 9)]


def test_transfers_in_loop():
    result = scan(LOOP.format(body="w = torch.tensor([1.0]).to(device)\n        z = y.to(device, non_blocking=True)\n"
                                   "        h = y.to(torch.float16)"))
    found = [d for d in result.findings if d.code == "ANA042"]
    assert [(d.line, "built on the host" in d.message) for d in found] == [(10, True)]


def test_round_trip_anywhere():
    result = scan("import torch\nx = torch.tensor(y.cpu().numpy()).cuda()\nz = y.cpu().to(dev)\nw = y.cpu().to(torch.half)\n")
    assert [c for c in codes(result) if c[0] == "ANA043"] == [("ANA043", 2), ("ANA043", 3)]


def test_no_loop_without_backward():
    result = scan("for x in data:\n    print(x.item())\n")
    assert result.findings == [] and result.train_loops == []


def test_aliases_and_cuda_kinds():
    result = scan("""
        import torch as th
        import torch.nn as tnn
        from torch.cuda.amp import autocast, GradScaler
        scaler = GradScaler()
        with autocast():
            pass
        th.cuda.synchronize()
        layer = tnn.Conv2d(1, 2, 3)
        x = th.ones(1, device="cuda:1")
        with th.autocast("cuda"):
            pass
        ok = "cuda_model.pt"
        """)
    kinds = sorted((s.line, s.kind) for s in result.sites)
    assert kinds == [(4, "AMP"), (5, "AMP"), (6, "AMP"), (8, "torch.cuda API"), (10, "device placement"),
                     (11, "AMP")]
    assert [op for op, _, _ in result.ops] == ["torch.nn.Conv2d"]


def test_unrelated_names_are_not_torch():
    result = scan("import numpy as np\nclass Linear: pass\nx = np.matmul(a, b)\ny = Linear()\n")
    assert result.ops == [] and result.sites == []


def test_fusion_swiglu_geglu_and_sequential_statements():
    result = scan("""
        import torch.nn as nn
        import torch.nn.functional as F
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.w1 = nn.Linear(4, 8)
                self.w2 = nn.Linear(4, 8)
                self.conv = nn.Conv2d(3, 3, 1)
                self.bn = nn.BatchNorm2d(3)
            def forward(self, x, y):
                a = F.silu(self.w1(x)) * self.w2(x)
                b = F.gelu(x) * y
                y = self.conv(y)
                y = self.bn(y)
                y = F.relu(y)
                return a + b
        """)
    patterns = sorted((d.line, d.message.split(")")[0].removeprefix("fusion (")) for d in result.findings)
    assert patterns == [(12, "linear+activation"), (12, "swiglu"), (13, "geglu"),
                        (14, "conv+batchnorm+activation")]


def test_module_inheritance_across_files():
    base = scan("import torch.nn as nn\nclass Base(nn.Module):\n    pass\n", "a.py")
    child = scan("from a import Base\nclass Child(Base):\n    pass\nclass Other(object):\n    pass\n", "b.py")
    aggregator = Aggregator()
    aggregator.add(base)
    aggregator.add(child)
    result = aggregator.finish()
    structure = result.sections["architecture"][0]
    assert [row[0] for row in structure.rows] == ["Base", "Child"]


def test_dataloader_keywords_and_positional():
    result = scan("from torch.utils.data import DataLoader\n"
                  "a = DataLoader(ds, 32, True, num_workers=4, pin_memory=True, persistent_workers=True)\n"
                  "b = DataLoader(ds, **cfg)\n")
    a, b = result.dataloaders
    assert a["settings"] == {"dataset": "ds", "batch_size": 32, "shuffle": True, "num_workers": 4,
                             "pin_memory": True, "persistent_workers": True}
    assert b["unpacked"]
    aggregator = Aggregator(("memory",))
    aggregator.add(result)
    memory = aggregator.finish()
    # b's settings are unknown (**cfg): no advice is invented for it
    assert [d.line for d in memory.findings if d.code == "ANA040"] == [2]
    assert "drop_last=True" in next(d.message for d in memory.findings if d.code == "ANA040")


def test_kernel_list_data():
    kernels, custom = catalog.npu_kernels()
    assert {"matmul", "addmm", "convolution", "native_layer_norm", "_fused_adamw_"} <= kernels
    assert "_linalg_eigh" not in kernels and "_fused_adam_" not in kernels
    assert {"npu_rms_norm", "npu_fusion_attention", "npu_swiglu"} <= custom
    assert catalog.kernel_status(["matmul"]) == ("native", [])
    assert catalog.kernel_status(["_linalg_eigh"]) == ("cpu-fallback risk", ["_linalg_eigh"])
    assert catalog.kernel_status(None) == ("unmapped", [])


def test_catalog_aten_names_are_real_operators():
    """Every aten name in the operator catalog is either in the NPU kernel list or is a known
    missing one: a typo would silently turn into a false 'CPU fallback risk'."""
    import torch

    for name, entry in catalog.operators().items():
        for op in entry["aten"] or []:
            assert hasattr(torch.ops.aten, op), (name, op)


# the sha256 of the workplace's reference/npu_aten_ops.tsv the shipped list was taken from
KERNEL_LIST_SHA256 = "ea06273d92fb21539a4ef9631243e4c508c5aae3207add191b81945f414ec6c6"


def test_shipped_kernel_list_is_the_reference_it_was_taken_from():
    """In any clone: the shipped list is the one taken from the reference (its digest); where the
    workplace's ../shared is present, that reference still is that list."""
    import hashlib
    import os
    from pathlib import Path

    from analyze_paths import REPO

    shipped = Path(catalog.KERNEL_TABLE).read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == KERNEL_LIST_SHA256
    reference = os.path.join(REPO, "..", "shared", "reference", "npu_aten_ops.tsv")
    if os.path.exists(reference):
        with open(reference, "rb") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == KERNEL_LIST_SHA256


def test_attribute_stores_do_not_hide_imports():
    result = scan("import torch\ntorch.backends.cudnn.benchmark = True\ntorch.cuda.synchronize()\n"
                  "import numpy as np\nnp = None\nx = np.matmul(a, b)\n")
    assert sorted((s.line, s.kind) for s in result.sites) == [(2, "other CUDA API"), (3, "torch.cuda API")]


def test_shell_launchers(tmp_path):
    from npu_migrate.analyze.worker import analyze_file

    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n# torchrun in a comment\nexport CUDA_VISIBLE_DEVICES=0,1\n"
                      "torchrun --nproc_per_node=2 train.py\npython -m torch.distributed.launch x.py\n")
    result = analyze_file(str(script), None)
    assert result.distributed == [("launcher", "torchrun", 4), ("launcher", "-m torch.distributed.launch", 5)]
