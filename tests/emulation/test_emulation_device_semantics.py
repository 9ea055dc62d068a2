"""The emulated npu behaves like a device: placement, mixing errors, branches, host copies,
save/load, autograd, optimizers, DataLoader, autocast, generators, DDP over gloo in 2 processes,
and the CPU-fallback / float64 warnings torch_npu would give."""

from __future__ import annotations

import copy
import io
import os
import pickle
import socket
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from npu_migrate import emulation
from npu_migrate.emulation._fidelity import NpuDtypeWarning, NpuFallbackWarning

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def emu():
    with emulation.emulated():
        import torch_npu

        yield torch_npu


def _npu0() -> torch.device:
    return torch.device("npu", 0)


def test_tensors_parameters_gradients_and_buffers_are_on_the_npu(emu):
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)).npu()
    x = torch.randn(5, 4, device="npu")
    model(x).sum().backward()
    for tensor in [x, *model.parameters(), *(p.grad for p in model.parameters()), *model.buffers()]:
        assert tensor.device == _npu0(), tensor
        assert tensor.is_npu and not tensor.is_cpu and not tensor.is_cuda
        assert tensor.get_device() == 0
    assert str(x.device) == "npu:0" and "device='npu:0'" in repr(x)


def test_ops_keep_results_on_the_npu_views_and_in_place_ops_included(emu):
    x = torch.arange(12.0, device="npu").reshape(3, 4)
    results = [x + 1, x @ x.t(), x.sum(), x[1], x.t(), x.view(-1), torch.cat([x, x]), x.max(dim=1).values,
               F.softmax(x, -1), torch.where(x > 3, x, 0.0), x.to(torch.float16), x.clone()]
    assert all(r.device.type == "npu" for r in results)
    row = x[1]
    assert row.add_(100) is row and x[1, 0].item() == 104.0  # in place through a view
    assert x.mul_(2) is x


def test_branches_on_the_device_take_the_npu_path(emu):
    x = torch.ones(2).npu()
    path = "npu" if x.device.type == "npu" else "cpu"
    assert path == "npu"
    assert x.device.type != "cpu" and not x.is_cuda and x.is_npu
    assert torch.ones(2).is_npu is False


def test_mixing_npu_and_cpu_raises_as_a_device_does_but_cpu_scalars_mix(emu):
    x = torch.ones(3, 4, device="npu")
    message = r"^Expected all tensors to be on the same device, but found at least two devices, npu:0 and cpu!"
    with pytest.raises(RuntimeError, match=message):
        x + torch.ones(3, 4)
    with pytest.raises(RuntimeError, match=message):
        nn.Linear(4, 2)(x)  # a model left on the CPU
    with pytest.raises(RuntimeError, match=message):
        nn.Linear(4, 2).npu()(torch.ones(3, 4))  # a batch left on the CPU
    assert (x * torch.tensor(2.0)).device.type == "npu"  # a 0-dim CPU tensor is a scalar
    assert x[torch.tensor([0, 2])].shape == (2, 4)  # indexing with host indices is allowed
    x.copy_(torch.zeros(3, 4))  # so is copying across devices
    assert x.sum().item() == 0.0


def test_host_conversions_behave_as_for_a_device_tensor(emu):
    x = torch.tensor([1.5, 2.5], device="npu")
    with pytest.raises(TypeError, match="can't convert npu:0 device type tensor to numpy"):
        x.numpy()
    assert x.tolist() == [1.5, 2.5] and x[0].item() == 1.5 and f"{x.sum():.2f}" == "4.00"
    assert bool(x.sum() > 4) is False and int(x[1]) == 2 and float(x[0]) == 1.5
    for host in (x.cpu(), x.to("cpu"), x.to(torch.device("cpu")), x.detach().cpu()):
        assert type(host) is torch.Tensor and host.device.type == "cpu"
        assert host.numpy().tolist() == [1.5, 2.5]
    host = x.cpu()
    host.add_(1)  # a copy: the npu tensor does not change
    assert x.tolist() == [1.5, 2.5]
    back = host.to("npu")
    assert back.device.type == "npu" and host.device.type == "cpu"


def test_save_and_load_keep_the_placement_and_honour_map_location(emu, tmp_path):
    model = nn.Linear(3, 2).npu()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "step": torch.tensor(7, device="npu"), "host": torch.ones(2)}, path)
    loaded = torch.load(path)
    assert loaded["model"]["weight"].device.type == "npu" and loaded["step"].device.type == "npu"
    assert loaded["host"].device.type == "cpu"
    assert torch.equal(loaded["model"]["weight"].cpu(), model.weight.detach().cpu())
    assert torch.load(path, map_location="cpu")["model"]["weight"].device.type == "cpu"
    assert type(torch.load(path, map_location="cpu")["step"]) is torch.Tensor
    assert torch.load(path, map_location=torch.device("cpu"))["step"].device.type == "cpu"
    assert torch.load(path, map_location={"npu:0": "cpu"})["step"].device.type == "cpu"
    assert torch.load(path, map_location="npu")["host"].device.type == "npu"
    assert torch.load(path, map_location=lambda storage, location: storage)["step"].device.type == "cpu"
    fresh = nn.Linear(3, 2).npu()
    fresh.load_state_dict(torch.load(path, map_location="cpu")["model"])  # host -> device copy
    assert fresh.weight.device.type == "npu"


def test_the_saved_file_says_npu_as_a_device_checkpoint_does(emu, tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.arange(4.0, device="npu"), path)
    with zipfile.ZipFile(path) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    locations = []

    class Reader(pickle.Unpickler):
        def persistent_load(self, saved_id):
            locations.append(saved_id[3])
            return torch.storage.TypedStorage(saved_id[4], dtype=torch.float32)

        def find_class(self, module, name):
            assert (module, name) in {("torch._utils", "_rebuild_tensor_v2"), ("collections", "OrderedDict"),
                                      ("torch", "FloatStorage")}, (module, name)
            return super().find_class(module, name)

    Reader(io.BytesIO(data)).load()
    assert locations == ["npu:0"]  # torch's own format, located on the device


def test_whole_module_save_and_deepcopy_keep_npu_parameters(emu):
    model = nn.Linear(2, 2).npu()
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=False)
    twin = copy.deepcopy(model)
    for clone in (restored, twin):
        assert isinstance(clone.weight, nn.Parameter) and clone.weight.device.type == "npu"
        assert clone.weight is not model.weight and torch.equal(clone.weight.cpu(), model.weight.cpu())


def test_autograd_and_an_optimizer_built_before_the_move(emu):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)  # built while the parameters are on the CPU
    weight = model[0].weight
    model.npu()
    assert model[0].weight is weight and weight.device.type == "npu"  # the same Parameter, moved
    before = weight.detach().cpu().clone()
    loss = model(torch.randn(6, 4, device="npu")).pow(2).mean()
    loss.backward()
    optimizer.step()
    assert not torch.equal(before, weight.detach().cpu())
    assert all(s.device.type == "npu" for s in optimizer.state[weight].values() if s.dim() > 0)


def test_optimizers_and_clipping_take_their_foreach_kernels_as_on_a_device(emu):
    """On a device optimizers default to the foreach kernels (one op over all parameters), on the CPU
    to a loop per parameter: another order of operations, which per-op comparisons see. The npu's
    parameters are a tensor subclass, which torch would loop over unless told otherwise."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpNames(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    host = nn.Linear(4, 3)
    model = copy.deepcopy(host).npu()
    x = torch.randn(5, 4)
    for module, batch in ((host, x), (model, x.npu())):
        optimizers = (torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9), torch.optim.Adam(module.parameters()))
        for _ in range(2):
            module(batch).square().sum().backward()
            with OpNames() as seen:
                nn.utils.clip_grad_norm_(module.parameters(), 0.1)
                for optimizer in optimizers:
                    optimizer.step()
    assert {"_foreach_norm.Scalar", "_foreach_add_.List", "_foreach_addcdiv_.ScalarList"} <= set(seen.names)
    assert "add_.Tensor" not in seen.names  # no per-parameter loop
    assert torch.allclose(model.weight.detach().cpu(), host.weight.detach(), atol=1e-6)  # the CPU's loop: same numbers


def test_recurrent_layers_run_forward_and_backward(emu):
    for layer in (nn.LSTM(4, 6, batch_first=True), nn.GRU(4, 6), nn.LSTMCell(4, 6), nn.GRUCell(4, 6)):
        layer.npu()
        inputs = torch.randn(3, 4, device="npu") if "Cell" in type(layer).__name__ else torch.randn(2, 3, 4, device="npu")
        output = layer(inputs)
        first = output[0] if isinstance(output, tuple) else output
        first.sum().backward()
        assert first.device.type == "npu"
        assert all(p.grad is not None and p.grad.device.type == "npu" for p in layer.parameters())


@pytest.mark.parametrize("options", [{"num_layers": 2, "bidirectional": True}, {"batch_first": True, "bias": False}])
def test_lstm_runs_the_cpus_fused_layer_kernel(emu, options):
    """An npu LSTM records the ops the CPU records (one mkldnn_rnn_layer per layer and direction,
    not every time step's cell ops) and computes the same numbers, forward and backward: the
    verifier pairs the two sides' ops one to one (the cell-by-cell decomposition made a clean
    word_language_model migration fail)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpNames(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    host = nn.LSTM(4, 6, **options)
    inputs = torch.randn(5, 3, 4)
    runs = []
    for module, batch in ((host, inputs), (copy.deepcopy(host).npu(), inputs.npu())):
        with OpNames() as seen, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            output, (h, c) = module(batch)
            (output.sum() + h.square().sum() + c.sum()).backward()
        # torch_npu has an LSTM kernel: the CPU kernel standing in for it is no fallback
        assert not [w for w in caught if issubclass(w.category, NpuFallbackWarning)]
        runs.append((seen.names, output.detach().cpu(), [p.grad.cpu() for p in module.parameters()]))
    (host_ops, host_out, host_grads), (npu_ops, npu_out, npu_grads) = runs
    assert npu_ops.count("mkldnn_rnn_layer.default") == (4 if options.get("bidirectional") else 1)
    assert [n for n in npu_ops if n != "_to_copy.default"] == [n for n in host_ops if n != "_to_copy.default"]
    assert torch.equal(npu_out, host_out)
    assert all(torch.equal(a, b) for a, b in zip(npu_grads, host_grads))


@pytest.mark.parametrize("masked", [False, True])
def test_attention_runs_the_cpus_fused_kernel(emu, masked):
    """scaled_dot_product_attention on the npu runs the fused kernel the CPU picks, forward and
    backward, not the math path (other ops, and matmuls a device-precision run rounds in HF32: a
    clean nanoGPT migration failed on it): the same ops and numbers as on the CPU, and no fallback
    warning (torch_npu has a fused attention)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpNames(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    q, k, v, mask = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(5, 5)
    runs = []
    for device in ("cpu", "npu"):
        leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        options = {"attn_mask": mask.to(device)} if masked else {"is_causal": True}
        with OpNames() as seen, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = F.scaled_dot_product_attention(*leaves, **options)
            out.square().sum().backward()
        assert not [w for w in caught if issubclass(w.category, NpuFallbackWarning)]
        runs.append((seen.names, out.detach().cpu(), [t.grad.cpu() for t in leaves]))
    (host_ops, host_out, host_grads), (npu_ops, npu_out, npu_grads) = runs
    assert "_scaled_dot_product_flash_attention_for_cpu.default" in npu_ops and "bmm.default" not in npu_ops
    assert [n for n in npu_ops if n != "_to_copy.default"] == [n for n in host_ops if n != "_to_copy.default"]
    assert torch.equal(npu_out, host_out) and all(torch.equal(a, b) for a, b in zip(npu_grads, host_grads))



@pytest.mark.parametrize("activation", [F.silu, F.mish])
def test_gradients_the_cpu_computes_in_one_kernel_run_in_one_kernel_on_the_npu(emu, activation):
    """silu_backward and mish_backward have a CPU kernel (and a torch_npu one) and a composite that
    torch expands for other devices, rounding each of its steps: in bfloat16 that composite's
    gradient was off by 0.03 at the largest elements and a MiniMind LoRA fine-tune failed verify.
    On the npu the op itself runs, on the backing CPU's kernel: bit for bit the CPU's gradient."""
    torch.manual_seed(0)
    x, grad = torch.randn(64, 256, dtype=torch.bfloat16), torch.randn(64, 256, dtype=torch.bfloat16)
    gradients = []
    for device in ("cpu", "npu"):
        leaf = x.detach().to(device).requires_grad_()
        activation(leaf).backward(grad.to(device))
        assert leaf.grad.device.type == device
        gradients.append(leaf.grad.cpu())
    assert torch.equal(gradients[0], gradients[1])
    leaf = x.float().npu().requires_grad_()  # and its own gradient (double backward) still works
    (first,) = torch.autograd.grad(activation(leaf).sum(), leaf, create_graph=True)
    first.sum().backward()
    assert leaf.grad.device.type == "npu" and torch.isfinite(leaf.grad.cpu()).all()


def test_channel_shuffle_runs_the_cpus_kernel(emu):
    x = torch.arange(2 * 6 * 3 * 3, dtype=torch.float32).reshape(2, 6, 3, 3)
    shuffled = F.channel_shuffle(x.npu(), 3)
    assert shuffled.device.type == "npu" and torch.equal(shuffled.cpu(), F.channel_shuffle(x, 3))

def test_autocast_casts_in_the_cpus_order(emu):
    """Under autocast the npu casts a linear layer's arguments in the order torch's C++ autocast
    kernels do on the CPU (and on a device): weight and bias before the input. Casting left to
    right put a bf16 cast where the CPU reference has none (a clean nanoGPT AMP migration failed)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Casts(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.shapes: list[tuple[int, ...]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._to_copy.default:
                self.shapes.append(tuple(out.shape))
            return out

    layer, inputs = nn.Linear(8, 6), torch.randn(4, 8)
    orders = []
    for device, module, batch in (("cpu", layer, inputs), ("npu", copy.deepcopy(layer).npu(), inputs.npu())):
        with torch.autocast(device, dtype=torch.bfloat16), Casts() as casts:
            assert module(batch).dtype == torch.bfloat16
        orders.append(casts.shapes)
    assert orders[1] == orders[0] and len(orders[0]) == 3 and orders[0][-1] == (4, 8)


def test_dataloader_pin_memory_and_non_blocking_copies(emu):
    dataset = torch.utils.data.TensorDataset(torch.arange(8.0).reshape(8, 1))
    batches = [b.to("npu", non_blocking=True) for (b,) in torch.utils.data.DataLoader(dataset, batch_size=4,
                                                                                         pin_memory=True)]
    assert [b.device.type for b in batches] == ["npu", "npu"] and sum(b.sum().item() for b in batches) == 28.0


def test_autocast_on_the_npu_uses_the_device_lists(emu):
    model = nn.Linear(8, 4).npu()
    x = torch.randn(2, 8, device="npu")
    with torch.autocast(device_type="npu"):
        assert torch.is_autocast_enabled("npu") and torch.get_autocast_dtype("npu") == torch.float16
        out = model(x)
        assert out.dtype == torch.float16 and out.device.type == "npu"
        assert F.softmax(out, -1).dtype == torch.float32  # CUDA's (and torch_npu's) fp32 list
        assert F.layer_norm(out, (4,)).dtype == torch.float32
        assert torch.mv(x, x[0]).dtype == torch.float16  # lowered on a device, not on the CPU
    with torch.autocast("npu", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()  # the casts are recorded by autograd: gradients come back in float32
    assert model.weight.grad.dtype == torch.float32 and model.weight.grad.device.type == "npu"
    assert not torch.is_autocast_enabled("npu")


def test_generators_and_seeds(emu):
    generator = torch.Generator(device="npu")
    assert generator.device == _npu0() and isinstance(generator, torch.Generator)
    generator.manual_seed(3)
    first = torch.randn(4, generator=generator, device="npu")
    generator.manual_seed(3)
    assert torch.equal(first.cpu(), torch.randn(4, generator=generator, device="npu").cpu())
    torch.manual_seed(11)
    drawn = torch.rand(3, device="npu")
    torch.npu.manual_seed(11)
    assert torch.equal(drawn.cpu(), torch.rand(3, device="npu").cpu())


def test_device_indices_follow_set_device(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with emulation.emulated():
        on_zero = torch.ones(2, 2, device="npu")
        torch.npu.set_device(1)
        x = torch.ones(2, 2, device="npu", requires_grad=True)
        y = torch.ones(2, 2).to("npu:1")
        assert x.device == torch.device("npu", 1) == y.device and x.get_device() == 1
        (x * y).sum().backward()  # autograd works on npu:1
        assert x.grad.device == torch.device("npu", 1)
        with pytest.raises(RuntimeError, match="npu:0 and npu:1"):
            on_zero + y
        # torch's C++ side makes tensors like a wrapper with npu:0: that index means the current device
        assert torch.zeros(1, device="npu:0").device == torch.device("npu", 1)


def test_memory_statistics_count_npu_tensors_only(emu):
    torch.npu.reset_peak_memory_stats()
    start = torch.npu.memory_allocated()
    host = torch.ones(1000)
    device = torch.ones(1000, device="npu")
    assert torch.npu.memory_allocated() - start == 4000
    del device
    assert torch.npu.memory_allocated() == start and host.sum().item() == 1000


def test_an_operator_without_npu_kernel_warns_once_at_the_users_line(emu):
    matrix = torch.eye(3, device="npu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.linalg.eigh(matrix); line = sys._getframe().f_lineno  # noqa: E702
        torch.linalg.eigh(matrix)
    fallbacks = [w for w in caught if issubclass(w.category, NpuFallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    assert (fallbacks[0].filename, fallbacks[0].lineno) == (__file__, line)
    assert "CAUTION: The operator 'aten::_linalg_eigh.eigenvalues' is not currently supported on the NPU " \
           "backend and will fall back to run on the CPU." in str(fallbacks[0].message)


def test_float64_computation_is_flagged_at_the_users_line(emu):
    x = torch.ones(3, device="npu", dtype=torch.float64)  # making it: no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = x * 2; line = sys._getframe().f_lineno  # noqa: E702
    doubles = [w for w in caught if issubclass(w.category, NpuDtypeWarning)]
    assert [(w.filename, w.lineno) for w in doubles] == [(__file__, line)]
    assert "float64" in str(doubles[0].message) and y.dtype == torch.float64


def test_a_float32_training_step_gives_no_fidelity_warning(emu):
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Dropout(0.1),
                          nn.Linear(64, 10), nn.LayerNorm(10)).npu()
    optimizer = torch.optim.Adam(model.parameters())
    scaler = torch.amp.GradScaler("npu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("npu"):
            loss = F.cross_entropy(model(torch.randn(2, 1, 6, 6, device="npu")), torch.tensor([1, 2]).npu())
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    assert not [str(w.message) for w in caught if issubclass(w.category, (NpuFallbackWarning, NpuDtypeWarning))]


def test_fallback_is_an_error_with_torch_npu_fallback_cpu_disable(tmp_path):
    script = tmp_path / "strict.py"
    script.write_text("import torch, torch_npu\ntorch.linalg.eigh(torch.eye(2, device='npu'))\n")
    result = subprocess.run([sys.executable, "-m", "npu_migrate.emulation", str(script)], capture_output=True,
                            text=True, timeout=120, check=False,
                            env={**os.environ, "TORCH_NPU_FALLBACK_CPU_DISABLE": "1"})
    assert result.returncode != 0
    assert "CAUTION: The operator 'aten::_linalg_eigh.eigenvalues' is not currently supported on the NPU " \
           "backend." in result.stderr and "strict.py:2" in result.stderr


def test_activating_after_a_backward_pass_is_one_clear_error(tmp_path):
    """torch's autograd engine sizes its device queues at a process's first backward pass: after a
    CPU backward, the npu has none, and activate() says so instead of leaving every later backward
    to stop on torch's internal assert."""
    script = tmp_path / "late.py"
    script.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n"
                      "from npu_migrate import emulation\nemulation.activate()\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode != 0
    assert "EmulationError: a backward pass ran in this process before the emulation was activated" in result.stderr
    assert "INTERNAL ASSERT" not in result.stderr


DDP_SCRIPT = """
import os, sys, torch, torch_npu
import torch.distributed as dist
from torch import nn
rank = int(os.environ["RANK"])
torch.npu.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("hccl")
assert dist.get_backend() == "hccl"
torch.manual_seed(0)
model = nn.Linear(3, 1).npu()
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
x = torch.full((2, 3), float(rank + 1), device="npu")
ddp(x).sum().backward()
grad = model.weight.grad
total = torch.tensor([float(rank)], device="npu")
dist.all_reduce(total)
print(grad.device, [round(v, 4) for v in grad.cpu().view(-1).tolist()], total.item(), model.weight.device, flush=True)
dist.destroy_process_group()
"""


def test_ddp_over_gloo_in_two_processes(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    with socket.socket() as probe:  # a free port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    procs = [subprocess.Popen([sys.executable, "-m", "npu_migrate.emulation", str(script)],
                              env={**base, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outputs]
    lines = [o[0].strip() for o in outputs]
    # each rank's gradient is 2 * its input (1 or 2); DDP averages them to 3.0, on both ranks
    assert lines == ["npu:0 [3.0, 3.0, 3.0] 1.0 npu:0", "npu:1 [3.0, 3.0, 3.0] 1.0 npu:1"], lines


def test_cross_entropy_under_autocast_is_the_devices_composite_on_both_sides(emu):
    """CUDA (and torch_npu, whose lists are CUDA's) has no autocast kernel for cross_entropy: its
    composite runs log_softmax in the logits' dtype, then nll_loss in float32. The verifier's noise
    run of the original on the CPU (`DeviceAutocast`) and the emulated npu agree on that, bit for
    bit; the CPU's own autocast would run the whole op in float32 (a clean nanoGPT AMP migration
    failed at its loss)."""
    from npu_migrate.emulation._autocast import DeviceAutocast

    logits, target = torch.randn(16, 50), torch.randint(0, 50, (16,))
    target[3] = -1
    with torch.autocast("cpu", dtype=torch.bfloat16), DeviceAutocast("cpu"):
        noise_run = F.cross_entropy(logits.bfloat16(), target, ignore_index=-1)
    with torch.autocast("npu", dtype=torch.bfloat16):
        device = F.cross_entropy(logits.bfloat16().npu(), target.npu(), ignore_index=-1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu_own = F.cross_entropy(logits.bfloat16(), target, ignore_index=-1)
    assert noise_run.dtype == device.dtype == torch.float32
    assert torch.equal(noise_run, device.cpu())
    assert not torch.equal(noise_run, cpu_own)  # the CPU's float32 op is another computation
