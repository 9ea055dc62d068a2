"""NPU410 reuses the value flow: loaders that come back from helper functions, in the same module
and across modules (the project loader index), make their batch copies non-blocking."""

import json
import os
from textwrap import dedent

import pytest
import rule_cases

from codemods.analyses.loadervalues import LOADER_INDEX_OPTION, project_loader_index

HEADER = "import torch\nfrom torch.utils.data import DataLoader\n"


def migrate(src: str, path: str = "train.py", imported=None):
    options = {LOADER_INDEX_OPTION: {os.path.abspath(path): imported}} if imported else None
    return rule_cases.migrate(dedent(src), ["pin-memory"], path, options=options)


def after(src: str, path: str = "train.py", imported=None) -> str:
    outcome = migrate(src, path, imported)
    return outcome.new_text if outcome.new_text is not None else dedent(src)


SAME_MODULE = [
    # the loop iterates the helper's call itself
    ("""\
     def make_loader(ds):
         return DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)

     for x, y in make_loader(ds):
         x = x.to(device)
     """, "x = x.to(device, non_blocking=True)"),
    # a method returning the loader, iterated through enumerate
    ("""\
     class Module:
         def train_dataloader(self):
             return DataLoader(self.ds, pin_memory=True)

         def fit(self, model, device):
             for step, batch in enumerate(self.train_dataloader()):
                 batch = batch.to(device)
     """, "batch = batch.to(device, non_blocking=True)"),
    # a helper that returns another helper's loader
    ("""\
     def base(ds):
         return DataLoader(ds, pin_memory=True)

     def wrapped(ds):
         return base(ds)

     loader = wrapped(ds)
     for x in loader:
         x.cuda()
     """, "x.cuda(non_blocking=True)"),
    # one batch taken with next(iter(...)) outside any loop
    ("""\
     def make_loader(ds):
         return DataLoader(ds, pin_memory=True)

     def show(ds, device):
         images, labels = next(iter(make_loader(ds)))
         images = images.to(device)
     """, "images = images.to(device, non_blocking=True)"),
]


@pytest.mark.parametrize("src,expected", SAME_MODULE)
def test_loaders_from_helpers_in_the_same_module(src, expected):
    text = after(HEADER + dedent(src))
    assert expected in text
    assert after(text) == text  # twice == once


CROSS_MODULE = [
    ("""\
     from data import build_loader
     for x, y in build_loader(cfg):
         x, y = x.to(device), y.to(device)
     """, ["build_loader"],
     "x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)"),
    ("""\
     import data as d
     loader = d.build_loader(cfg)
     for batch in tqdm(loader):
         batch = {k: v.to(device) for k, v in batch.items()}
     """, ["d.build_loader"], "v.to(device, non_blocking=True)"),
]


@pytest.mark.parametrize("src,imported,expected", CROSS_MODULE)
def test_loaders_from_helpers_of_other_modules(src, imported, expected):
    assert expected in after(src, imported=imported)
    assert "non_blocking" not in after(src)  # without the index nothing proves the loader pins


UNTOUCHED = [
    # a helper whose loader does not pin
    HEADER + "def make(ds):\n    return DataLoader(ds, pin_memory=False)\n"
             "for x in make(ds):\n    x = x.to(device)\n",
    # a helper that returns a pinned loader on one path and something else on another
    HEADER + "def make(ds, fast):\n    if fast:\n        return DataLoader(ds)\n    return ds\n"
             "for x in make(ds, True):\n    x = x.to(device)\n",
    # copies that are not of the batch: model outputs, to the host, dtype changes
    HEADER + "def make(ds):\n    return DataLoader(ds, pin_memory=True)\n"
             "for x in make(ds):\n    out = model(x)\n    out = out.to(device)\n    x.to('cpu')\n"
             "    x.to(torch.float16)\n",
    # next() of something that is not a pinning loader
    HEADER + "images, labels = next(iter(batches))\nimages = images.to(device)\n",
    # an imported function the index does not name
    "from data import build_dataset\nfor x in build_dataset(cfg):\n    x = x.to(device)\n",
]


@pytest.mark.parametrize("src", UNTOUCHED)
def test_untouched(src):
    assert "non_blocking" not in after(src, imported=["build_loader"])


def test_a_model_output_copied_beside_the_batch_stays_blocking():
    # pytorch/examples distributed/rpc/parameter_server: the names of a statement are bound after
    # its calls, element by element
    src = (HEADER + "def make(ds):\n    return DataLoader(ds, pin_memory=True)\n"
           "for data, target in make(ds):\n    pred = model(data).argmax(1)\n"
           "    pred, target = pred.to(device), target.to(device)\n")
    assert "pred, target = pred.to(device), target.to(device, non_blocking=True)" in after(src)


def test_arguments_on_one_line_with_the_bracket_below_keep_that_layout():
    # Lightning's examples/fabric/build_your_own_trainer/run.py
    src = HEADER + "loader = DataLoader(\n    ds, batch_size=64, num_workers=4\n)\n"
    assert after(src) == HEADER + ("loader = DataLoader(\n    ds, batch_size=64, num_workers=4, pin_memory=True, "
                                   "persistent_workers=True\n)\n")


def write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_project_index_follows_absolute_relative_and_module_imports(tmp_path):
    files = [
        write(tmp_path, "pkg/__init__.py", ""),
        write(tmp_path, "pkg/data.py", HEADER + dedent("""\
              def build_loader(ds):
                  return DataLoader(ds, num_workers=2)

              def raw_loader(ds):
                  return DataLoader(ds, pin_memory=False)

              def _local(ds):
                  for x in build_loader(ds):
                      pass
              """)),
        write(tmp_path, "pkg/train.py", "from .data import build_loader as bl, raw_loader\n"),
        write(tmp_path, "main.py", "import pkg.data\nfrom pkg import data\nfrom pkg.data import build_loader\n"),
        write(tmp_path, "other.py", "from elsewhere import build_loader\n"),
        write(tmp_path, "broken.py", "from pkg.data import build_loader\ndef (:\n"),
    ]
    index = project_loader_index(files, str(tmp_path))
    assert index == {
        str(tmp_path / "pkg/train.py"): ["bl"],
        str(tmp_path / "main.py"): ["build_loader", "data.build_loader", "pkg.data.build_loader"],
    }


def test_apply_uses_the_loader_index_under_shards(tmp_path, monkeypatch):
    """The index is computed over every discovered file before --shard narrows the set."""
    from click.testing import CliRunner

    from npu_migrate.commands.apply import command

    write(tmp_path, "data.py", HEADER + "def build_loader(ds):\n    return DataLoader(ds, num_workers=2)\n")
    write(tmp_path, "train.py", "from data import build_loader\n"
                                "def train(model, ds, device):\n"
                                "    for x, y in build_loader(ds):\n"
                                "        loss = model(x.to(device), y.to(device))\n")
    monkeypatch.chdir(tmp_path)
    edited = {}
    for k in (1, 2):
        result = CliRunner().invoke(command, ["--check", "--format", "json", "--no-cache", "--enable",
                                              "pin-memory", "--select", "NPU410", "--shard", f"{k}/2", "."],
                                    catch_exceptions=False)
        for entry in json.loads(result.stdout)["files"]:
            edited[os.path.basename(entry["path"])] = [e["message"] for e in entry["edits"]]
    assert sum("non_blocking" in message for message in edited["train.py"]) == 2
    assert any("pin_memory=True" in message for message in edited["data.py"])


def test_amp_evaluation_loops_over_a_loader_helper():
    """NPU400 recognises an evaluation loop over what a loader helper returns."""
    src = dedent("""\
        import torch

        class Runner:
            @torch.no_grad()
            def evaluate(self, model):
                for x, y in self.val_dataloader():
                    pred = model(x)

            @torch.no_grad()
            def evaluate_all(self, model):
                for x in self.compute_metrics():
                    pred = model(x)
        """)
    text = rule_cases.migrate(src, ["NPU100"], "train.py", enable=("amp",)).new_text
    assert text.count("torch.autocast(") == 1
    assert text.index("torch.autocast(") < text.index("def evaluate_all")
