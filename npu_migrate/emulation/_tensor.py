"""The emulated device: tensors that are on "npu" as far as torch and the user's code can tell.

An `NpuTensor` is a wrapper tensor subclass (torch's `_make_wrapper_subclass`) whose device is the
renamed PrivateUse1 backend, "npu". It holds a tensor of the backing device (`backing_tensor`: CPU, or CUDA
with `activate("cuda")`) and runs every aten operator on it in `__torch_dispatch__`, wrapping the
results again. So `x.device` is `npu:0`, `x.is_cpu` is False, results of ops stay on the npu, and
an op that mixes an npu tensor with a CPU tensor that has dimensions raises the error a device
raises (0-dim CPU tensors are allowed, as on a device). `.cpu()` and `.to("cpu")` return plain
tensors of the backing data, copied.

torch itself needs a device guard and hooks for a PrivateUse1 backend before the first operator
runs on it; `torch._C._acc` registers Python ones (what the experimental helper
`torch.utils.backend_registration._setup_privateuseone_for_python_backend` does, minus its device
module: the emulation installs its own `torch.npu`). Factory operators (`torch.zeros(...,
device="npu")`, the `empty` of `.to("npu")`) take no tensor to dispatch on, so each aten factory
gets a PrivateUse1 kernel that builds on the backing device and wraps.

Device indices: the Python device guard counts one device, and the autograd engine asserts on a
tensor of `npu:1`. Every wrapper is therefore `npu:0` to torch's C++ side; the index the code asked
for (`torch.npu.set_device(1)`, `"npu:1"`) is kept on the wrapper and reported by `x.device` and
`x.get_device()`, and an op mixing two indices raises as a device does. Because C++ code makes
tensors with the device `npu:0` of a wrapper, a device argument `npu:0` means the current device
(as `npu` does): after `torch.npu.set_device(1)` no tensor lands on npu:0.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, SupportsIndex

import torch

from ._state import MAPPING, STATE, EmulationError

aten = torch.ops.aten
NPU = MAPPING["device_type"]
# ops that may take tensors of two devices on a device too: copies and indexing with host indices
_MIX_ALLOWED = frozenset({
    aten.copy_.default, aten._to_copy.default, aten._copy_from.default, aten._copy_from_and_resize.default,
    aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default,
    aten._unsafe_index.Tensor, aten._unsafe_index_put.default, aten.set_.source_Tensor,
    aten.lift_fresh.default})
_COMPRESSED = frozenset({torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc})
_FACTORY_SKIP = ("sparse", "quantized", "cudnn", "mkldnn", "nested", "_make_dep_token", "from_file", "miopen",
                 "_efficientzerotensor")


class NpuTensor(torch.Tensor):
    """A tensor on the emulated npu; `backing_tensor` holds its data on the backing device."""

    backing_tensor: torch.Tensor
    npu_index: int

    @staticmethod
    def __new__(cls, inner: torch.Tensor, index: int = 0, requires_grad: bool = False) -> NpuTensor:
        if inner.layout in _COMPRESSED:
            raise EmulationError(f"{inner.layout} tensors cannot be placed on the emulated npu: torch's wrapper "
                                 "tensors support the strided and sparse COO layouts only (npu-migrate emulation; "
                                 "use .to_sparse() for COO, or keep this tensor on the CPU)")
        strided = inner.layout == torch.strided  # sparse layouts have no strides or storage offset
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls, inner.size(), strides=inner.stride() if strided else None,
            storage_offset=inner.storage_offset() if strided else None,
            dtype=inner.dtype, layout=inner.layout, device=_WRAPPER_DEVICE, requires_grad=requires_grad)
        wrapper.backing_tensor = inner
        wrapper.npu_index = index
        return wrapper

    def __init__(self, inner: torch.Tensor, index: int = 0, requires_grad: bool = False) -> None:
        super().__init__()

    # no __torch_function__: methods and functions reach aten (and __torch_dispatch__) directly, and
    # a plain tensor that an op returns (.cpu()) is not turned into this class
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return dispatch(func, args, kwargs or {})

    # traceable wrapper subclass: Module.to()/.npu() then swap each Parameter in place
    # (torch.utils.swap_tensors), so optimizers built before the move keep the same objects
    def __tensor_flatten__(self) -> tuple[list[str], int]:
        return ["backing_tensor"], self.npu_index

    @staticmethod
    def __tensor_unflatten__(inner_tensors: dict[str, torch.Tensor], index: int, outer_size: Any,
                             outer_stride: Any) -> NpuTensor:
        return NpuTensor(inner_tensors["backing_tensor"], index)

    @property
    def device(self) -> torch.device:  # type: ignore[override]  # torch's is a plain attribute
        return torch.device(NPU, self.npu_index)

    def get_device(self) -> int:
        return self.npu_index

    @property
    def is_npu(self) -> bool:
        return True

    def data_ptr(self) -> int:
        return self.backing_tensor.data_ptr()

    def untyped_storage(self) -> torch.UntypedStorage:
        # the backing storage: shared by views, so storage identity, data_ptr() and nbytes() mean
        # what they mean for a device tensor (its .device is the backing device's)
        return self.backing_tensor.untyped_storage()

    def numpy(self, *, force: bool = False) -> Any:
        if not force:  # a device tensor never converts; numpy(force=True) copies to the host first
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.")
        return self.detach().cpu().numpy()

    def tolist(self) -> Any:
        return self.backing_tensor.tolist()

    def __repr__(self, *, tensor_contents=None):  # type: ignore[no-untyped-def]
        # printed from a host copy, as a device tensor prints: tensor([...], device='npu:0', ...)
        text = repr(self.backing_tensor.detach().cpu())
        suffixes = [f"device='{self.device}'"]
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{type(self.grad_fn).__name__}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return f"{text[:-1]}, {', '.join(suffixes)})"

    def __format__(self, spec: str) -> str:
        if self.dim() == 0:  # f"{loss:.4f}" formats the number, as for any 0-dim tensor
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __deepcopy__(self, memo: dict[int, Any]) -> torch.Tensor:
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            copy: torch.Tensor = NpuTensor(self.backing_tensor.clone(), self.npu_index,
                                           requires_grad=self.requires_grad)
        if getattr(self, "_is_param", False):
            copy = torch.nn.Parameter(copy, requires_grad=self.requires_grad)
        if self.grad is not None:
            copy.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = copy
        return copy

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return reduce_for_save(self)


# ---- wrapping -------------------------------------------------------------------------------
# wrap() runs once per op result: the constructor's arguments are looked up once here
_MAKE_WRAPPER = torch.Tensor._make_wrapper_subclass
# npu:0, what torch's C++ side sees (see the module docstring); the PrivateUse1 backend is named
# "npu" only when activate() runs, so the device is made by its type's own name
_WRAPPER_DEVICE = torch.device("privateuseone", 0)


def wrap(inner: torch.Tensor, index: int) -> NpuTensor:
    if inner.layout is torch.strided:  # NpuTensor(inner, index) without the layout checks
        out = _MAKE_WRAPPER(NpuTensor, inner.size(), strides=inner.stride(), storage_offset=inner.storage_offset(),
                            dtype=inner.dtype, device=_WRAPPER_DEVICE)
        out.backing_tensor = inner
        out.npu_index = index
    else:
        out = NpuTensor(inner, index)
    if STATE.memory is not None:
        STATE.memory.see(inner)
    return out


def logical_index(device: Any) -> int:
    """The npu index a device argument means. torch's C++ side knows only npu:0 (see the module
    docstring) and makes tensors "like" an npu tensor with that device (DDP's gradient buckets,
    autograd's zeros), so index 0, like no index, means the current device: on a device
    process whose current device is npu:1, they would be on npu:1."""
    index = device.index if isinstance(device, torch.device) else None
    return index if index else STATE.current_index


def backing(index: int = 0) -> torch.device:
    return torch.device("cuda", index) if STATE.backing == "cuda" else torch.device("cpu")


class _Call:
    """What one dispatched call found among its arguments."""

    __slots__ = ("host", "index", "indices", "wrappers")

    def __init__(self) -> None:
        self.wrappers: dict[int, NpuTensor] = {}  # id(inner) -> its wrapper
        self.host: torch.Tensor | None = None  # a plain tensor with dimensions
        self.index = -1  # the npu index of the last npu tensor argument
        self.indices: set[int] | None = None  # every npu index, once there are two

    def unwrap(self, value: Any) -> Any:
        if isinstance(value, NpuTensor):
            inner = value.backing_tensor
            self.wrappers[id(inner)] = value
            if value.npu_index != self.index:
                self._saw_index(value.npu_index)
            return inner
        if isinstance(value, torch.Tensor):
            if self.host is None and value.dim() > 0:
                self.host = value
            return value
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], (torch.Tensor, type(None))):
            # tensor lists (foreach ops, cat): NpuTensor elements unwrapped in the loop, without a call each
            wrappers, unwrapped = self.wrappers, []
            for item in value:
                if type(item) is NpuTensor and item.npu_index == self.index:
                    inner = item.backing_tensor
                    wrappers[id(inner)] = item
                    unwrapped.append(inner)
                else:
                    unwrapped.append(self.unwrap(item))
            return type(value)(unwrapped)
        return value

    def _saw_index(self, index: int) -> None:
        if self.index >= 0 and self.indices is None:
            self.indices = {self.index}
        if self.indices is not None:
            self.indices.add(index)
        self.index = index

    def rewrap(self, value: Any, index: int) -> Any:
        if isinstance(value, torch.Tensor):
            same = self.wrappers.get(id(value))
            return same if same is not None else wrap(value, index)
        if isinstance(value, (list, tuple)):
            return type(value)(self.rewrap(v, index) for v in value)
        return value


def dispatch(func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    call = _Call()
    inner_args = tuple(map(call.unwrap, args))
    inner_kwargs = {k: call.unwrap(v) for k, v in kwargs.items()} if kwargs else kwargs
    index = call.index
    if kwargs and kwargs.get("device") is not None:
        target = torch.device(kwargs["device"])
        if target.type != NPU:  # .cpu(), .to("cpu"), empty_like(x, device="cpu"): a plain result
            return func(*inner_args, **inner_kwargs)
        index = logical_index(target)
        inner_kwargs["device"] = backing(index)
    if call.indices is not None and func not in _MIX_ALLOWED:
        low, high = sorted(call.indices)[:2]
        raise RuntimeError(_mix_message(func, f"{NPU}:{low}", f"{NPU}:{high}"))
    if call.host is not None and func not in _MIX_ALLOWED:
        raise RuntimeError(_mix_message(func, f"{NPU}:{call.index}", str(call.host.device), call.host))
    if STATE.fidelity is not None:
        STATE.fidelity.check(func, inner_args)
    if STATE.npu_rng is not None and func in STATE.npu_rng.random_ops:
        out = STATE.npu_rng.run(func, inner_args, inner_kwargs)
    else:
        out = func(*inner_args, **inner_kwargs)
    return call.rewrap(out, index if index >= 0 else STATE.current_index)


def _mix_message(func: Any, first: str, second: str, host: torch.Tensor | None = None) -> str:
    name = func._schema.name.removeprefix("aten::")
    where = ""
    if STATE.sites is not None:  # activate(audit=True): the verifier reads "placement audit"
        where = ": placement audit"
        made = STATE.sites.site_of(host) if host is not None else None
        if made and host is not None:
            where += f"; the {second.upper()} tensor {list(host.shape)} was made at {made}"
    return (f"Expected all tensors to be on the same device, but found at least two devices, {first} and "
            f"{second}! (in {name}; npu-migrate emulation{where})")


# ---- factories and copies reached without an npu tensor argument -----------------------------
def _factory_ops() -> Iterator[tuple[str, Any]]:
    """Every aten overload with a `device` argument and no tensor argument (empty, zeros, arange,
    randn, ...): nothing to dispatch on but the device."""
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::") or any(part in full for part in _FACTORY_SKIP):
            continue
        name, _, overload = full.removeprefix("aten::").partition(".")
        try:
            op = getattr(getattr(aten, name), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        schema = op._schema
        if len(schema.returns) != 1 or "Tensor" not in str(schema.returns[0].type):
            continue
        if not any(a.name == "device" for a in schema.arguments):
            continue
        if any("Tensor" in str(a.type) for a in schema.arguments):
            continue
        yield full.removeprefix("aten::"), op


def _factory_kernel(op: Any) -> Callable[..., NpuTensor]:
    def kernel(*args: Any, **kwargs: Any) -> NpuTensor:
        if not STATE.active:  # registrations outlive deactivate(): torch offers no way to drop them
            raise RuntimeError("npu device: the npu-migrate emulation is not active (and no torch_npu is loaded)")
        index = logical_index(kwargs.get("device"))
        kwargs["device"] = backing(index)
        kwargs.pop("pin_memory", None)
        if STATE.npu_rng is not None and op in STATE.npu_rng.random_ops:
            return wrap(STATE.npu_rng.run(op, args, kwargs), index)
        return wrap(op(*args, **kwargs), index)

    return kernel


def _copy_from(source: torch.Tensor, destination: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """copy_ into an npu tensor where torch excludes Python dispatch (torch.tensor(data, device="npu"))."""
    data = source.backing_tensor if isinstance(source, NpuTensor) else source
    target = destination.backing_tensor if isinstance(destination, NpuTensor) else destination
    target.copy_(data, non_blocking=non_blocking)
    return destination


class _Hooks(torch._C._acc.PrivateUse1Hooks):  # type: ignore[misc,name-defined]
    def is_available(self) -> bool:
        return bool(STATE.active)

    def has_primary_context(self, device_index: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


_PRIVATE_USE1 = torch._C._autograd.DeviceType.PrivateUse1


class _Guard(torch._C._acc.DeviceGuard):  # type: ignore[misc,name-defined]
    def type_(self) -> Any:  # asked by every device guard torch makes (the backward pass: once per node)
        return _PRIVATE_USE1


_REGISTERED: list[Any] = []  # the library holding the kernels: registrations live as long as it does
_LOCK = threading.Lock()


def register_backend() -> None:
    """Once per process: device guard, hooks, factory and copy kernels for PrivateUse1 ("npu").
    torch offers no way to unregister them; after deactivate() the hooks answer "not available"
    and the emulated torch.npu is gone."""
    with _LOCK:
        if _REGISTERED:
            return
        if not hasattr(torch._C, "_acc"):
            raise EmulationError("this torch has no torch._C._acc (Python PrivateUse1 backends); "
                                 f"torch {torch.__version__} cannot host the emulated npu device")
        torch._C._acc.register_python_privateuseone_hook(_Hooks())
        torch._C._acc.register_python_privateuseone_device_guard(_Guard())
        library = torch.library.Library("aten", "IMPL")
        for name, op in _factory_ops():
            library.impl(name, _factory_kernel(op), "PrivateUse1")
        library.impl("_copy_from", _copy_from, "PrivateUse1")
        _register_recurrent(library)
        _register_backing_kernels(library)
        _REGISTERED.append(library)


def _backing_kernel_ops() -> list[str]:
    """The aten ops with a kernel of their own on the CPU that other devices run as a composite
    (silu_backward, mish_backward, native_channel_shuffle): torch_npu has kernels for them
    (npu_aten_ops.tsv), one rounding each, where the composite rounds every step (a bfloat16
    silu_backward made of seven bfloat16 ops is off by 0.03 at its largest elements)."""
    names = torch._C._dispatch_get_all_op_names()
    return [name.removeprefix("aten::") for name in names if name.startswith("aten::")
            and torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")
            and torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")]


def _unreached(*args: Any, **kwargs: Any) -> Any:
    raise EmulationError("an npu op reached the PrivateUse1 kernel instead of NpuTensor.__torch_dispatch__")


def _register_backing_kernels(library: Any) -> None:
    """With a PrivateUse1 kernel registered, the dispatcher no longer expands the composite at the
    autograd key: the op itself reaches `NpuTensor.__torch_dispatch__` (the Python key comes before
    the backend's), which runs the backing device's kernel, as the CPU reference does. The kernel
    registered is never called."""
    for name in _backing_kernel_ops():
        library.impl(name, _unreached, "PrivateUse1")


def _gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # type: ignore[no-untyped-def]
    reset_i, update_i, new_i = torch.nn.functional.linear(input, w_ih, b_ih).chunk(3, 1)
    reset_h, update_h, new_h = torch.nn.functional.linear(hx, w_hh, b_hh).chunk(3, 1)
    reset, update = torch.sigmoid(reset_i + reset_h), torch.sigmoid(update_i + update_h)
    new = torch.tanh(new_i + reset * new_h)
    return new + update * (hx - new)


def _lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # type: ignore[no-untyped-def]
    gates = torch.nn.functional.linear(input, w_ih, b_ih) + torch.nn.functional.linear(hx[0], w_hh, b_hh)
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, 1)
    cy = torch.sigmoid(forget_gate) * hx[1] + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
    return torch.sigmoid(out_gate) * torch.tanh(cy), cy


_MKLDNN_LSTM = 2  # mkldnn_rnn_layer's `mode` for an LSTM layer


def _lstm_layers(decomposed: Any) -> Any:
    """lstm.input on npu tensors: one fused kernel per layer and direction, as on a device
    (torch_npu's npu_lstm) and as on the CPU that backs them (`mkldnn_rnn_layer`, which the CPU's
    LSTM runs for float32): the same ops, in the same order, as the CPU reference records, so the
    verifier pairs them one to one (torch's decomposition would run each time step's cell ops).
    Other cases (projections, other dtypes, no mkldnn) take the decomposition."""

    def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # type: ignore[no-untyped-def]
        directions = 2 if bidirectional else 1
        per_layer = 4 if has_biases else 2
        tensors = [input, *hx, *params]
        if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
                and input.dtype == torch.float32 and input.numel() > 0
                and len(params) == num_layers * directions * per_layer and hx[0].shape == hx[1].shape
                and all(type(t) is NpuTensor and t.backing_tensor.device.type == "cpu" for t in tensors)):
            return decomposed(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        h0, c0 = hx[0].contiguous(), hx[1].contiguous()
        layer_input = (input.transpose(0, 1) if batch_first else input).contiguous()
        last_h, last_c = [], []
        for layer in range(num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, *biases = params[index * per_layer:(index + 1) * per_layer]
                layer_h, layer_c = h0[index], c0[index]
                b_ih, b_hh = biases if has_biases else (torch.zeros(w.shape, dtype=w.dtype, device=w.device)
                                                        for w in (w_ih, w_hh))
                output, h, c, _ = aten.mkldnn_rnn_layer(
                    layer_input, w_ih, w_hh, b_ih, b_hh, layer_h, layer_c, direction > 0, [], _MKLDNN_LSTM,
                    h0.size(2), num_layers, has_biases, bidirectional, batch_first, train)
                outputs.append(output)
                last_h.append(h)
                last_c.append(c)
            layer_input = outputs[0] if directions == 1 else torch.cat(outputs, -1)
            if dropout and train and layer < num_layers - 1:
                layer_input = torch.dropout(layer_input, dropout, True)
        hy, cy = torch.stack(last_h, 0), torch.stack(last_c, 0)
        return layer_input.transpose(0, 1) if batch_first else layer_input, hy, cy

    return lstm


_FLASH = 1  # torch.nn.attention.SDPBackend.FLASH_ATTENTION: the value _fused_sdp_choice returns for it


def _attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):  # type: ignore[no-untyped-def]
    """scaled_dot_product_attention on npu tensors: one fused kernel, as on a device (torch_npu's
    fused attention), the one the CPU backing them picks (its flash kernel), so its ops and numbers
    are the CPU reference's. torch picks a fused kernel per device type in C++ and has none for
    PrivateUse1, which would take the math path (matmuls, softmax: other ops, other rounding).
    A boolean mask, grouped-query attention or the CPU's own math choice take the math path."""
    tensors = [t for t in (query, key, value, attn_mask) if t is not None]
    if (not enable_gqa and (attn_mask is None or attn_mask.dtype != torch.bool)
            and all(type(t) is NpuTensor and t.backing_tensor.device.type == "cpu" for t in tensors)):
        backing = [t.backing_tensor for t in (query, key, value)]
        mask = attn_mask.backing_tensor if attn_mask is not None else None
        with torch._C._DisableTorchDispatch():  # a question about host tensors: no op of the user's
            choice = aten._fused_sdp_choice(*backing, mask, dropout_p, is_causal, scale=scale)
        if choice == _FLASH:
            return aten._scaled_dot_product_flash_attention_for_cpu(
                query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
    return aten.scaled_dot_product_attention.default.decompose(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def _register_recurrent(library: Any) -> None:
    """GRU and LSTM take fused-cell kernels on any PrivateUse1 device (`_thnn_fused_*_cell`),
    which the CPU lacks: npu tensors run them through torch's own decompositions and plain cells
    instead, at the autograd key (torch_npu registers its own kernels for gru/lstm there too),
    and a float32 LSTM through the CPU's fused layer kernel (`_lstm_layers`)."""
    from torch._decomp import decomposition_table

    for name in ("gru.input", "gru.data", "lstm.data"):
        base, _, overload = name.partition(".")
        library.impl(name, decomposition_table[getattr(getattr(aten, base), overload)], "AutogradPrivateUse1")
    library.impl("lstm.input", _lstm_layers(decomposition_table[aten.lstm.input]), "AutogradPrivateUse1")
    library.impl("gru_cell", _gru_cell, "AutogradPrivateUse1")
    library.impl("lstm_cell", _lstm_cell, "AutogradPrivateUse1")
    library.impl("scaled_dot_product_attention", _attention, "AutogradPrivateUse1")


# ---- torch.save / torch.load ------------------------------------------------------------------
_LOCATION = "_npu_migrate_location"  # attribute on a backing storage that is an npu storage's data


def reduce_for_save(tensor: NpuTensor) -> Any:
    """Pickle an npu tensor as torch pickles a device tensor: its storage, with location "npu:N"
    (the tagger below), rebuilt by torch._utils._rebuild_tensor_v2; a Parameter as a Parameter."""
    if getattr(tensor, "_is_param", False):
        return (torch._utils._rebuild_parameter, (tensor.detach(), tensor.requires_grad, OrderedDict()))
    if tensor.layout != torch.strided:
        # torch pickles a sparse tensor as its parts (indices, values), rebuilt by
        # torch._utils._rebuild_sparse_tensor; on a device the parts are the device's tensors
        rebuild, (layout, parts) = tensor.backing_tensor.__reduce_ex__(2)
        return rebuild, (layout, tuple(NpuTensor(part, tensor.npu_index) if isinstance(part, torch.Tensor) else part
                                       for part in parts))
    inner = tensor.backing_tensor.cpu() if tensor.backing_tensor.device.type != "cpu" else tensor.backing_tensor
    storage = inner.untyped_storage()
    setattr(storage, _LOCATION, f"{NPU}:{tensor.npu_index}")
    typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=inner.dtype, _internal=True)
    return (torch._utils._rebuild_tensor_v2,
            (typed, inner.storage_offset(), tuple(inner.size()), inner.stride(), tensor.requires_grad, OrderedDict()))


def location_tag(storage: Any) -> str | None:
    return getattr(storage, _LOCATION, None)


def restore_npu(storage: Any, location: str) -> Any:
    """Deserializer of "npu:N" storages: the data stays on the host, marked, and the loader turns
    the tensors built on it into npu tensors (see `npu_tensors_of`)."""
    if not location.startswith(NPU):
        return None
    setattr(storage, _LOCATION, location)
    return storage


def npu_tensors_of(value: Any, seen: dict[int, Any] | None = None) -> Any:
    """`value` (what torch.load returned) with every tensor whose storage came from an "npu:N"
    location turned into an npu tensor; containers, modules and objects' attributes are walked."""
    seen = {} if seen is None else seen
    key = id(value)
    if key in seen:
        return seen[key]
    if isinstance(value, torch.Tensor) and not isinstance(value, NpuTensor):
        location = _storage_location(value)
        result: Any = value
        if location is not None:
            index = int(location.partition(":")[2] or 0)
            with torch.no_grad():
                result = NpuTensor(value.detach(), index, requires_grad=value.requires_grad)
            if isinstance(value, torch.nn.Parameter):
                result = torch.nn.Parameter(result, requires_grad=value.requires_grad)
        seen[key] = result
        return result
    seen[key] = value
    if isinstance(value, dict):
        for k in list(value):
            value[k] = npu_tensors_of(value[k], seen)
    elif isinstance(value, list):
        value[:] = [npu_tensors_of(v, seen) for v in value]
    elif isinstance(value, tuple):
        converted = tuple(npu_tensors_of(v, seen) for v in value)
        if any(a is not b for a, b in zip(converted, value)):
            result = type(value)(*converted) if hasattr(value, "_fields") else type(value)(converted)
            seen[key] = result
            return result
    elif isinstance(value, torch.nn.Module):
        value._apply(lambda t: npu_tensors_of(t, seen))
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for name, attribute in list(vars(value).items()):
            if isinstance(attribute, (torch.Tensor, dict, list, tuple, torch.nn.Module)):
                setattr(value, name, npu_tensors_of(attribute, seen))
    return value


def _storage_location(tensor: torch.Tensor) -> str | None:
    if tensor.layout == torch.sparse_coo:  # a sparse tensor is where its values are
        tensor = tensor._values()
    elif tensor.layout != torch.strided:
        tensor = tensor.values()
    try:
        return location_tag(tensor.untyped_storage())
    except (RuntimeError, NotImplementedError):
        return None
