"""The emulation layer on CPU: device strings, the torch.npu namespace, AMP, distributed, ops."""

from __future__ import annotations

import io
import sys

import pytest
import torch
import torch.nn.functional as F

from npu_migrate import emulation
from npu_migrate.emulation import EmulationError

FAKE_REAL = __import__("pathlib").Path(__file__).resolve().parents[1] / "verify" / "fake_torch_npu"


@pytest.fixture
def emu():
    with emulation.emulated():
        import torch_npu

        yield torch_npu


def test_device_strings_make_npu_tensors(emu):
    assert torch.zeros(2, device="npu").device == torch.device("npu", 0)
    assert torch.ones(2, device="npu:0").sum().item() == 2
    device = torch.device("npu", 0)
    assert (device.type, device.index) == ("npu", 0)
    assert torch.randn(3, device=device).device.type == "npu"
    assert torch.arange(4).to("npu").tolist() == [0, 1, 2, 3]
    assert torch.arange(4).to(device="npu:0", dtype=torch.float16).dtype == torch.float16
    assert torch.ones(2).new_zeros(3, device="npu").device.type == "npu"
    model = torch.nn.Linear(3, 2).npu()
    x = torch.randn(4, 3).npu()
    assert x.is_npu and model(x).shape == (4, 2) and model(x).device.type == "npu"
    with torch.device("npu"):
        assert torch.empty(1).device.type == "npu"
    torch.set_default_device("npu:0")
    try:
        assert torch.empty(1).device.type == "npu"
    finally:
        torch.set_default_device(None)
    assert torch.empty(1).device.type == "cpu"


def test_torch_load_map_location(emu):
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buffer)
    for location in ("npu", "npu:0", torch.device("npu", 0), {"cpu": "npu:0"}):
        buffer.seek(0)
        assert torch.load(buffer, map_location=location)["w"].tolist() == [0.0, 1.0, 2.0]


def test_namespace_follows_torch_npu(emu):
    assert emu.npu is torch.npu and sys.modules["torch.npu"] is torch.npu
    assert torch.npu.is_available() and torch.npu.device_count() == 1
    torch.npu.set_device("npu:0")
    assert torch.npu.current_device() == 0
    with pytest.raises(EmulationError, match="1 device"):
        torch.npu.set_device(1)
    torch.npu.synchronize()
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    start.record()
    torch.randn(64, 64) @ torch.randn(64, 64)
    end.record()
    assert start.elapsed_time(end) >= 0
    with torch.npu.stream(torch.npu.Stream()):
        pass
    torch.npu.manual_seed(7)
    first = torch.randn(3, device="npu")
    torch.npu.manual_seed(7)
    assert torch.equal(first, torch.randn(3, device="npu"))
    assert torch.npu.get_device_capability() is None  # as torch_npu without the env var
    assert torch.float16 in torch.npu.get_amp_supported_dtype()
    with emu.npu.mstx.annotate("step"):
        emu.npu.mstx.mark("inside")


def test_autocast_and_grad_scaler(emu):
    model = torch.nn.Linear(8, 4).npu()
    x = torch.randn(2, 8, device="npu")
    with torch.autocast(device_type="npu"):
        assert model(x).dtype == torch.float16  # torch_npu's default AMP dtype
    with torch.npu.amp.autocast(dtype=torch.bfloat16):
        assert model(x).dtype == torch.bfloat16
    with torch.autocast("npu", enabled=False):
        assert model(x).dtype == torch.float32
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    scaler = torch.amp.GradScaler("npu")
    with torch.autocast("npu"):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert not torch.equal(before, model.weight)
    for dynamic, expected in ((False, 8.0), (True, 4.0)):  # an overflow backs off a dynamic scale only
        scaler = emu.npu.amp.GradScaler(init_scale=8.0, dynamic=dynamic)
        optimizer.zero_grad()
        scaler.scale(model(x).sum()).backward()
        model.weight.grad.fill_(float("inf"))
        scaler.step(optimizer)
        scaler.update()
        assert scaler.get_scale() == expected


def test_hccl_backend_runs_on_gloo(emu, tmp_path):
    import torch.distributed as dist

    dist.init_process_group("hccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert dist.get_backend() == "hccl"  # as torch_npu registers it; gloo runs it underneath
        tensor = torch.ones(3, device="npu")
        dist.all_reduce(tensor)
        assert tensor.tolist() == [1.0, 1.0, 1.0]
        assert dist.is_hccl_available()
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1).npu(), device_ids=[0])
        model(torch.ones(3, 2, device="npu")).sum().backward()  # gradients all-reduced over gloo
        assert model.module.weight.grad.tolist() == [[3.0, 3.0]]
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
def test_npu_fusion_attention_matches_sdpa(emu, layout):
    b, n, s, d = 2, 4, 6, 8
    q, k, v = (torch.randn(b, n, s, d, requires_grad=True) for _ in range(3))
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)  # True = masked out, as in torch_npu
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def pack(t):
        return {"BNSD": t, "BSND": t.transpose(1, 2), "BSH": t.transpose(1, 2).reshape(b, s, n * d),
                "SBH": t.permute(2, 0, 1, 3).reshape(s, b, n * d)}[layout]

    out = emu.npu_fusion_attention(pack(q), pack(k), pack(v), n, layout, atten_mask=causal,
                                   scale=d ** -0.5)[0]
    assert torch.allclose(out, pack(expected), atol=1e-5)
    out.sum().backward()
    assert q.grad is not None
    compressed = torch.ones(2048, 2048, dtype=torch.bool).triu(1)  # the mask torch_npu documents for mode 2
    by_mode = emu.npu_fusion_attention(pack(q), pack(k), pack(v), n, layout, atten_mask=compressed,
                                       sparse_mode=2, scale=d ** -0.5)[0]
    assert torch.allclose(by_mode, out, atol=1e-6)
    with pytest.raises(Exception, match="sparse_mode=2 needs atten_mask"):
        emu.npu_fusion_attention(pack(q), pack(k), pack(v), n, layout, sparse_mode=2, scale=d ** -0.5)


def test_fusion_attention_grouped_query(emu):
    q = torch.randn(1, 4, 5, 8)
    kv = torch.randn(1, 2, 5, 8)
    out = emu.npu_fusion_attention(q, kv, kv, 4, "BNSD", scale=0.3)[0]
    expected = F.scaled_dot_product_attention(q, kv.repeat_interleave(2, 1), kv.repeat_interleave(2, 1), scale=0.3)
    assert torch.allclose(out, expected, atol=1e-5)
    with pytest.raises(EmulationError, match="TND"):  # a 4-D query is not [T, N, D]
        emu.npu_fusion_attention(q, kv, kv, 4, "TND")


def test_fusion_attention_tnd_attends_within_each_sequence(emu):
    """TND (varlen): two packed sequences, the cumulative ends without a leading 0 as host ints;
    each sequence is its own attention, causal bottom-right per sequence (sparse_mode 3)."""
    q, kv = torch.randn(5, 2, 8), torch.randn(7, 2, 8)
    compressed = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
    out = emu.npu_fusion_attention(q, kv, kv, 2, "TND", atten_mask=compressed, sparse_mode=3, scale=0.3,
                                   actual_seq_qlen=[2, 5], actual_seq_kvlen=[3, 7])[0]
    for (q0, q1), (k0, k1) in (((0, 2), (0, 3)), ((2, 5), (3, 7))):
        one = [x[None].transpose(1, 2) for x in (q[q0:q1], kv[k0:k1])]
        mask = torch.ones(q1 - q0, k1 - k0, dtype=torch.bool).tril(k1 - k0 - (q1 - q0))  # True = kept
        expected = F.scaled_dot_product_attention(one[0], one[1], one[1], attn_mask=mask, scale=0.3)
        assert torch.allclose(out[q0:q1], expected[0].transpose(0, 1), atol=1e-5)
    with pytest.raises(EmulationError, match="list of ints"):  # a device tensor is not torch_npu's int[]
        emu.npu_fusion_attention(q, kv, kv, 2, "TND", actual_seq_qlen=torch.tensor([2, 5]), actual_seq_kvlen=[3, 7])
    with pytest.raises(EmulationError, match="cumulative ends"):  # flash-attn's cu_seqlens with its leading 0
        emu.npu_fusion_attention(q, kv, kv, 2, "TND", actual_seq_qlen=[0, 2, 5], actual_seq_kvlen=[3, 7])


def test_other_reference_ops(emu):
    x = torch.randn(3, 8)
    y, _ = emu.npu_rms_norm(x, torch.ones(8), epsilon=1e-6)
    assert torch.allclose(y, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), atol=1e-6)
    assert torch.allclose(emu.npu_swiglu(x), F.silu(x[:, :4]) * x[:, 4:])
    assert torch.allclose(emu.fast_gelu(x), x * torch.sigmoid(1.702 * x), atol=1e-6)


def test_unknown_operator_fails_clearly(emu):
    from torch_npu import npu_some_fused_kernel  # importing the name works

    with pytest.raises(EmulationError, match=r"torch_npu\.npu_some_fused_kernel"):
        npu_some_fused_kernel(torch.ones(1))
    with pytest.raises(AttributeError, match="no attribute 'not_an_op'"):
        _ = emu.not_an_op


def test_deactivate_undoes_the_patches():
    with emulation.emulated():
        assert emulation.is_active() and "torch_npu" in sys.modules
    assert not emulation.is_active()
    assert "torch_npu" not in sys.modules
    # the backend keeps its name (torch allows one rename), so a dormant torch.npu says "no device"
    assert torch.npu.is_available() is False and torch.npu.device_count() == 0
    assert not hasattr(torch.npu, "synchronize")
    assert torch.accelerator.is_available() is False
    assert not hasattr(torch.Tensor, "npu") and not hasattr(torch.nn.Module, "npu")
    with pytest.raises((RuntimeError, ImportError)):  # torch finds no npu device module again
        torch.zeros(1, device="npu")
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast is the stock class again
        assert torch.nn.Linear(2, 2)(torch.ones(1, 2)).dtype == torch.bfloat16


def test_refuses_when_real_torch_npu_is_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FAKE_REAL))
    assert emulation.real_torch_npu_available()
    with pytest.raises(emulation.RealTorchNpuError, match="real torch_npu"):
        emulation.activate()
    assert not emulation.is_active()


def test_bad_backing_devices_are_refused():
    with pytest.raises(EmulationError, match="'cpu' or 'cuda'"):
        emulation.activate("xpu")
    if not torch.cuda.is_available():
        with pytest.raises(EmulationError, match="no CUDA device"):
            emulation.activate("cuda")
    assert not emulation.is_active()


def test_memory_statistics_can_be_left_out():
    emulation.activate(track_memory=False)
    try:
        kept = torch.ones(1000, device="npu")
        assert torch.npu.memory_allocated() == 0 and torch.npu.max_memory_allocated() == 0
        assert emulation.activate() is False  # already active
    finally:
        emulation.deactivate()
    assert kept.sum().item() == 1000


def test_pinned_dataloaders_work_on_cpu_backing(tmp_path):
    """DataLoader(pin_memory=True), with and without workers, as the pin-memory rule writes it."""
    import subprocess
    import sys

    script = tmp_path / "pin.py"
    script.write_text(
        "import torch, torch_npu\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "ds = TensorDataset(torch.arange(8.0).reshape(8, 1), torch.arange(8))\n"
        "for workers in (0, 2):\n"
        "    dl = DataLoader(ds, batch_size=4, pin_memory=True, num_workers=workers)\n"
        "    total = sum(float(x.to('npu', non_blocking=True).sum()) for x, _ in dl)\n"
        "    print(workers, total)\n")
    result = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", str(script)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[:2] == ["0 28.0", "2 28.0"]
