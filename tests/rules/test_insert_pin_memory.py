"""NPU410 `pin-memory`: pinned DataLoaders, persistent workers, non-blocking batch copies."""

from textwrap import dedent

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


# The before/after examples are the CASES of NPU410 (in its rule module: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


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
