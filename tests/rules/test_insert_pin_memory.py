"""NPU410 `pin-memory`: pinned DataLoaders, persistent workers, non-blocking batch copies."""

from textwrap import dedent

import pytest
import rule_cases
import torch


HEADER = "import torch\nfrom torch.utils.data import DataLoader\n"


def migrate(src: str):
    return rule_cases.migrate(HEADER + dedent(src), ["pin-memory"], "data.py")


def after(src: str) -> str:
    outcome = migrate(src)
    text = outcome.new_text if outcome.new_text is not None else HEADER + dedent(src)
    assert text.startswith(HEADER)
    return text[len(HEADER):]


PAIRS = [
    ("dl = DataLoader(ds, batch_size=8)\n",
     "dl = DataLoader(ds, batch_size=8, pin_memory=True)\n"),
    ("dl = DataLoader(ds, batch_size=8, num_workers=4)\n",
     "dl = DataLoader(ds, batch_size=8, num_workers=4, pin_memory=True, persistent_workers=True)\n"),
    # a module constant for the workers; the layout of a multi-line call with a trailing comma
    ("WORKERS = 2\ndl = DataLoader(\n    ds,\n    num_workers=WORKERS,\n)\n",
     "WORKERS = 2\ndl = DataLoader(\n    ds,\n    num_workers=WORKERS,\n    pin_memory=True,\n"
     "    persistent_workers=True,\n)\n"),
    # workers from the command line: persistent only when there are some
    ("dl = torch.utils.data.DataLoader(ds, num_workers=args.workers)\n",
     "dl = torch.utils.data.DataLoader(ds, num_workers=args.workers, pin_memory=True, "
     "persistent_workers=args.workers > 0)\n"),
    # positional num_workers (6th argument); an explicit pin_memory is the user's choice
    ("dl = DataLoader(ds, 8, True, None, None, 3)\nd2 = DataLoader(ds, pin_memory=False)\n",
     "dl = DataLoader(ds, 8, True, None, None, 3, pin_memory=True, persistent_workers=True)\n"
     "d2 = DataLoader(ds, pin_memory=False)\n"),
    # batch copies in the loop over a pinned loader; results going back to the host are not touched
    ("""\
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
     """, """\
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
     """),
    # a loader from a helper function, passed to a training function as a parameter
    ("""\
     def make_loader(ds):
         return DataLoader(ds, batch_size=4, num_workers=2)

     def train(model, train_loader):
         for batch in train_loader:
             batch = {k: v.to(model.device) for k, v in batch.items()}

     def main():
         loader = make_loader(ds)
         train(net, loader)
     """, """\
     def make_loader(ds):
         return DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, persistent_workers=True)

     def train(model, train_loader):
         for batch in train_loader:
             batch = {k: v.to(model.device, non_blocking=True) for k, v in batch.items()}

     def main():
         loader = make_loader(ds)
         train(net, loader)
     """),
]


@pytest.mark.parametrize("before,expected", PAIRS)
def test_insertions(before, expected):
    assert after(before) == dedent(expected)
    assert after(dedent(expected)) == dedent(expected)  # twice == once


UNCHANGED = [
    # already pinned, workers persistent
    "dl = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)\n",
    # a loader that does not pin: its batch copies stay blocking
    "dl = DataLoader(ds, pin_memory=False, num_workers=1, persistent_workers=True)\n"
    "for x in dl:\n    x = x.to(device)\n",
    # a parameter also filled with something that is not a pinned loader
    "def run(dl):\n    for x in dl:\n        x.to(device)\n"
    "run(DataLoader(ds, pin_memory=True, num_workers=1, persistent_workers=True))\nrun(other_batches)\n",
    # not torch's DataLoader
    "from mylib import DataLoader as DL\ndl = DL(ds)\n",
]


@pytest.mark.parametrize("src", UNCHANGED)
def test_unchanged(src):
    assert migrate(src).new_text is None


def test_diagnostics_for_missing_workers_and_kwargs_splats():
    outcome = migrate("a = DataLoader(ds)\nb = DataLoader(ds, num_workers=0)\nc = DataLoader(ds, **kw)\n")
    messages = [(d.line, d.code, d.message) for d in outcome.diagnostics]
    assert [m[:2] for m in messages] == [(3, "NPU410"), (4, "NPU410"), (5, "NPU410")]
    assert "num_workers" in messages[0][2] and "num_workers" in messages[1][2]
    assert "**" in messages[2][2]
    assert outcome.new_text.count("pin_memory=True") == 2  # not into the `**kw` call


# -- pinning is safe for unusual loaders: run them with the rewritten arguments -------------------

class EvenSampler(torch.utils.data.Sampler):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(0, self.n, 2))

    def __len__(self):
        return self.n // 2


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        return iter([torch.full((2,), float(i)) for i in range(start, 6, step)])


def strings_collate(items):
    return {"names": [f"item{int(t[0])}" for t in items], "count": len(items), "data": torch.stack(items)}


LOADERS = """\
def build(ds, stream, sampler, collate):
    a = DataLoader(ds, batch_size=2, sampler=sampler)
    b = DataLoader(ds, batch_size=3, collate_fn=collate)
    c = DataLoader(stream, batch_size=2, num_workers=2)
    return a, b, c
"""


def test_rewritten_loaders_still_yield_the_same_batches(monkeypatch):
    text = after(LOADERS)
    assert text.count("pin_memory=True") == 3 and "persistent_workers=True" in text
    data = [torch.full((2,), float(i)) for i in range(6)]
    args = (data, Stream(), EvenSampler(6), strings_collate)
    namespace = {"DataLoader": torch.utils.data.DataLoader}
    exec(LOADERS, namespace)
    plain = namespace["build"](*args)
    # pretend an accelerator exists so that the loaders really take the pinning path
    pinned_calls = []

    def pin(self, device=None):
        pinned_calls.append(tuple(self.shape))
        return self.clone()

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cpu"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.accelerator, "set_device_index", lambda index: None)
    exec(text, namespace)
    rewritten = namespace["build"](*args)
    assert all(loader.pin_memory for loader in rewritten)
    for _epoch in range(2):  # persistent workers serve a second epoch too
        for old, new in zip(plain, rewritten):
            assert _flatten(list(old)) == _flatten(list(new))
    assert len(pinned_calls) >= 2 * (3 + 2 + 3)  # every tensor of every batch went through pinning


def _flatten(batches):
    out = []
    for batch in batches:
        if isinstance(batch, dict):
            out.append({k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in batch.items()})
        elif isinstance(batch, (list, tuple)):
            out.append([b.tolist() for b in batch])
        else:
            out.append(batch.tolist())
    return out
