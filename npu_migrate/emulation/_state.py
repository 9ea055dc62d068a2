"""Process-wide state of the emulation layer, shared by its modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from npu_migrate.emulation.data_tables import TABLES

# the emulation's facts, read and checked by core's one loader (schemas in data_tables.py)
MAPPING: dict[str, Any] = TABLES.load("mapping.json")
AUTOCAST: dict[str, Any] = TABLES.load("autocast.json")


class EmulationError(RuntimeError):
    """The emulation cannot do what was asked (an unknown torch_npu operator, a real torch_npu
    installed, a feature with no CPU counterpart). The message names what failed."""


class RealTorchNpuError(EmulationError):
    """Raised by activate() when the real torch_npu package is importable: the emulation would
    shadow it, so it refuses to run."""


@dataclass
class State:
    active: bool = False
    backing: str = "cpu"  # the device type "npu" is mapped onto: "cpu" or "cuda"
    current_index: int = 0
    amp_used: bool = False  # an npu autocast region was entered with enabled=True
    undo: list[Callable[[], None]] = field(default_factory=list)
    memory: Any = None  # _memory.CpuMemoryTracker when backing is cpu (sees every new npu tensor)
    sites: Any = None  # _audit.HostSites when activate(audit=True): where host tensors were made
    npu_rng: Any = None  # _audit.NpuRandomStream when activate(separate_rng=True)
    fidelity: Any = None  # _fidelity.OperatorFidelity: CPU-fallback and float64 warnings
    precision: Any = None  # _precision.DevicePrecision when activate(precision="device")


STATE = State()


def enter_mode(mode: Any, field_name: str) -> None:
    """Enter a torch mode, keep it in STATE.<field_name>; deactivate() leaves it and clears the field."""
    mode.__enter__()
    setattr(STATE, field_name, mode)

    def leave() -> None:
        mode.__exit__(None, None, None)
        setattr(STATE, field_name, None)

    STATE.undo.append(leave)


def set_attr(obj: Any, name: str, value: Any) -> None:
    """setattr that remembers how to undo itself on deactivate()."""
    missing = object()
    # on classes read the own __dict__ so that inherited attributes are deleted, not copied down
    old = obj.__dict__.get(name, missing) if isinstance(obj, type) else getattr(obj, name, missing)

    def restore() -> None:
        if old is missing:
            try:
                delattr(obj, name)
            except AttributeError:
                pass
        else:
            setattr(obj, name, old)

    setattr(obj, name, value)
    STATE.undo.append(restore)
