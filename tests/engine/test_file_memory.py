"""A migrated file's trees are freed by reference counting as soon as it is done: nothing of it is
left for the cyclic collector, which would have to walk every node first (a fifth of the CPU of
a run over torch's files before the engine broke those cycles)."""

from __future__ import annotations

import gc
import os

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SOURCE = '''\
import os
import torch
import torch.distributed as dist
from torch.cuda.amp import autocast

os.environ["CUDA_VISIBLE_DEVICES"] = "0"
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(torch.nn.Module):
    def forward(self, x):
        if x.is_cuda:
            torch.cuda.synchronize()
        return x.cuda()


def main():
    dist.init_process_group("nccl")
    model = Net().to(device)
    with autocast():
        loss = model(torch.randn(4, device="cuda")).sum()
    print(torch.cuda.max_memory_allocated())
    return loss
'''


def test_migrating_a_file_leaves_no_cyclic_garbage() -> None:
    ruleset = RuleSet(select_rules(all_rules(), (), (), ()), {})
    outcome = migrate_text(SOURCE, "train.py", ruleset)  # warm: caches of the process fill once
    assert outcome.new_text and len(outcome.edits) > 5  # most rule families took part
    gc.disable()
    try:
        gc.collect()
        outcome = migrate_text(SOURCE, "train.py", ruleset)
        left = gc.collect()
    finally:
        gc.enable()
    assert outcome.new_text and outcome.edits
    assert left == 0, f"{left} objects of the file were left in reference cycles"
