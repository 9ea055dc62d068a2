"""Evidence for the verifier: where host tensors were made, and the device's own random stream.

The emulated device raises by itself when an op mixes an npu tensor with a CPU tensor
(`_tensor.dispatch`). With `activate(audit=True)` the error also says where the CPU tensor was
made: a TorchFunctionMode records the user's line (the innermost frame outside torch and this
package) on every host tensor a torch call creates, and on a view of one (the slice of a CPU batch
that was never moved). DataLoader batches get the line that took them from the loader.

The random stream: a device draws its random numbers from its own generator (Philox on Ascend), not
the CPU's. With `separate_rng`, random operators that make npu tensors draw from a generator of
their own, seeded by torch.manual_seed / torch.npu.manual_seed like the device's, so a train-mode
run gets dropout masks that differ from the CPU's, as it does on hardware.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ._state import STATE, enter_mode, set_attr

_SITE = "_npu_migrate_site"
_PACKAGE_DIRS = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (torch,)) + (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)
_NPU_SEED_SALT = 0x9E3779B9  # the device's stream differs from the CPU's for the same seed


def user_site(callers: int = 2, depth: int = 2) -> str | None:
    """file:line of the innermost frame outside torch, this package and the standard library,
    followed by up to `callers` such frames that called it: "a.py:93 < a.py:105"."""
    frame: Any = sys._getframe(depth)
    stdlib = os.path.dirname(os.__file__) + os.sep
    found: list[str] = []
    while frame is not None and len(found) <= callers:
        path = frame.f_code.co_filename
        if not path.startswith(_PACKAGE_DIRS) and not path.startswith(stdlib) and not path.startswith("<"):
            found.append(f"{path}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(found) or None


def _host_tensors(value: Any) -> list[torch.Tensor]:
    from ._tensor import NpuTensor

    if isinstance(value, torch.Tensor):
        return [] if isinstance(value, NpuTensor) else [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor) and not isinstance(v, NpuTensor)]
    return []


class HostSites(TorchFunctionMode):
    """Records the user's line on the host tensors each torch call returns."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        made = _host_tensors(out)
        if made:
            site = user_site()
            for tensor in made:
                self.remember(tensor, site)
        return out

    @staticmethod
    def remember(tensor: torch.Tensor, site: str | None, overwrite: bool = True) -> None:
        """A tensor's own line (a view sharing a storage keeps its own), and its storage's unless
        known: a view made by indexing has no line until a torch call returns it."""
        if overwrite or _SITE not in tensor.__dict__:
            tensor.__dict__[_SITE] = site
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        if not hasattr(storage, _SITE):
            setattr(storage, _SITE, site)

    @staticmethod
    def site_of(tensor: torch.Tensor) -> str | None:
        own = tensor.__dict__.get(_SITE)
        if own is not None:
            return own
        try:
            return getattr(tensor.untyped_storage(), _SITE, None)
        except (RuntimeError, NotImplementedError):
            return None


def carry_site(source: torch.Tensor, copy: torch.Tensor) -> torch.Tensor:
    """`copy` (an input another mode rounded, say) keeps the line `source` was made at, so that a
    placement error on the copy still names where the host tensor came from."""
    site = HostSites.site_of(source)
    if site is not None and copy is not source:
        copy.__dict__[_SITE] = site
    return copy


def _tag_loader_batches() -> None:
    """A DataLoader's batches are host tensors, also when worker processes rebuilt them from shared
    memory (which no torch call of this process made): they get the line that took them."""
    from torch.utils.data import dataloader

    original = dataloader._BaseDataLoaderIter.__next__

    def next_batch(self):  # type: ignore[no-untyped-def]
        batch = original(self)
        site = user_site()
        for tensor in _leaves(batch):
            HostSites.remember(tensor, site, overwrite=False)
        return batch

    set_attr(dataloader._BaseDataLoaderIter, "__next__", next_batch)


def _leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return _host_tensors(value)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return []


class NpuRandomStream:
    """The device's generator: random aten operators (those torch tags nondeterministic_seeded)
    that run on npu tensors draw from it instead of the CPU's default generator."""

    def __init__(self) -> None:
        self.generator = torch.Generator()
        self.generator.manual_seed(torch.initial_seed() ^ _NPU_SEED_SALT)
        self.random_ops: _RandomOps = _RandomOps()

    def seed(self, seed: int) -> None:
        self.generator.manual_seed(int(seed) ^ _NPU_SEED_SALT)

    def run(self, func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        if kwargs.get("generator") is not None:  # the code's own generator decides
            return func(*args, **kwargs)
        cpu_state = torch.default_generator.get_state()
        torch.default_generator.set_state(self.generator.get_state())
        try:
            return func(*args, **kwargs)
        finally:
            self.generator.set_state(torch.default_generator.get_state())
            torch.default_generator.set_state(cpu_state)


class _RandomOps:
    """`op in random_ops`: whether torch tags the aten overload nondeterministic_seeded (cached)."""

    def __init__(self) -> None:
        self.known: dict[Any, bool] = {}

    def __contains__(self, op: Any) -> bool:
        seeded = self.known.get(op)
        if seeded is None:
            seeded = self.known[op] = torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())
        return seeded


def install(audit: bool, separate_rng: bool) -> None:
    """Enter the host-site recorder (audit) and/or the device's random stream; undone by deactivate()."""
    if audit:
        _tag_loader_batches()
        enter_mode(HostSites(), "sites")
    if separate_rng:
        STATE.npu_rng = NpuRandomStream()
        STATE.undo.append(lambda: setattr(STATE, "npu_rng", None))
