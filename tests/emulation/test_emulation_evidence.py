"""Emulation that gives evidence: where a CPU tensor was made, the device's own random stream, HF32."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from npu_migrate import emulation
from npu_migrate.emulation._precision import round_to_hf32


@pytest.fixture
def audited():
    emulation.activate(audit=True, separate_rng=True)
    try:
        yield
    finally:
        emulation.deactivate()


def test_a_training_loop_that_moves_everything_runs(audited):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to("npu")
    assert model[0].weight.device.type == "npu"
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    for x, y in torch.utils.data.DataLoader(data, batch_size=4):
        assert x.device.type == "cpu"
        x, y = x.to("npu"), y.npu()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    hidden = model[0].weight.new_zeros(2, 3)
    assert hidden.device.type == "npu"
    assert (torch.ones(2, device="npu") + torch.tensor(1.0)).tolist() == [2.0, 2.0]  # CPU scalar: allowed


def test_a_tensor_left_on_the_cpu_raises_like_a_device_and_says_where_it_was_made(audited):
    model = nn.Linear(4, 2).npu()
    left_behind = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"npu:0 and cpu!.*made at .*test_emulation_evidence.py:\d+"):
        model(left_behind)
    with pytest.raises(TypeError, match="can't convert npu:0"):
        torch.ones(2, device="npu").numpy()


def test_a_tensor_left_on_the_cpu_is_named_also_when_device_precision_rounds_the_inputs():
    """`verify --device-precision` rounds a convolution's inputs to HF32 before the device sees
    them (DCGAN's noise left on the CPU): the rounded copy keeps the line its original was made at."""
    emulation.activate(audit=True, precision="device")
    try:
        generator = nn.ConvTranspose2d(16, 8, 4, 1, 0, bias=False).npu()
        noise = torch.randn(4, 16, 1, 1)
        made = sys._getframe().f_lineno - 1
        with pytest.raises(RuntimeError, match=rf"npu:0 and cpu!.*made at .*test_emulation_evidence.py:{made}\b"):
            generator(noise)
    finally:
        emulation.deactivate()


def test_sparse_tensors_are_audited_moved_trained_on_and_saved(audited, tmp_path):
    """A graph network's adjacency (pytorch/examples' GCN and GAT build it sparse on the CPU): sparse
    tensors have no storage of their own, which the audit, the memory statistics and torch.save
    must not ask for."""
    adjacency = (torch.eye(5) + torch.diag(torch.ones(4), 1)).to_sparse()  # a host tensor, audited
    weight = nn.Parameter(torch.randn(3, 2, device="npu"))
    features = torch.randn(5, 3, device="npu")
    with pytest.raises(RuntimeError, match=r"npu:0 and cpu!.*made at .*test_emulation_evidence.py:\d+"):
        torch.spmm(adjacency, features @ weight)
    on_device = adjacency.to("npu")
    assert on_device.device.type == "npu" and on_device.is_sparse
    optimizer = torch.optim.Adam([weight], lr=0.1)
    torch.spmm(on_device, features @ weight).square().sum().backward()
    optimizer.step()
    assert weight.grad is not None and weight.grad.device.type == "npu"
    torch.save({"adjacency": on_device}, tmp_path / "graph.pt")
    loaded = torch.load(tmp_path / "graph.pt")["adjacency"]
    assert loaded.device.type == "npu" and loaded.is_sparse
    assert torch.equal(loaded.to_dense().cpu(), adjacency.to_dense())
    assert torch.load(tmp_path / "graph.pt", map_location="cpu")["adjacency"].device.type == "cpu"
    with pytest.raises(emulation.EmulationError, match="sparse_csr tensors cannot be placed on the emulated npu"):
        adjacency.to_sparse_csr().to("npu")


def test_moving_copies_so_the_cpu_original_stays_cpu(audited):
    host = torch.ones(3)
    device_copy = host.to("npu")
    assert device_copy.untyped_storage() is not host.untyped_storage()
    assert host.device.type == "cpu" and device_copy.device.type == "npu"
    assert device_copy.cpu().device.type == "cpu"


def test_the_device_stream_differs_from_the_cpu_stream_and_follows_its_seed(audited):
    torch.manual_seed(0)
    on_npu = F.dropout(torch.ones(64, device="npu"), 0.5)
    torch.manual_seed(0)
    on_cpu = F.dropout(torch.ones(64), 0.5)
    torch.manual_seed(0)
    again = F.dropout(torch.ones(64, device="npu"), 0.5)
    assert not torch.equal(on_npu.cpu(), on_cpu)
    assert torch.equal(on_npu, again)


def test_hf32_rounding_keeps_ten_mantissa_bits():
    x = torch.tensor([1.0 + 2**-11, 1.0 + 2**-10, 3.0, float("inf")])
    assert round_to_hf32(x).tolist() == [1.0 + 2**-10, 1.0 + 2**-10, 3.0, float("inf")]


def test_device_precision_rounds_matmul_only_when_allowed():
    a, b = torch.randn(16, 32, dtype=torch.float32), torch.randn(32, 8)
    exact = a @ b
    emulation.activate(precision="device")
    try:
        assert torch.equal(a @ b, exact)  # matmul HF32 is off by default in torch_npu
        torch.npu.matmul.allow_hf32 = True
        rounded = a @ b
    finally:
        emulation.deactivate()
    assert not torch.equal(rounded, exact)
    relative = float((rounded - exact).norm() / exact.norm())
    assert 1e-5 < relative < 2e-3
