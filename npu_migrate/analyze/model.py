"""What the per-file scan hands back to the parent process: small, picklable records of hits
only (never the text or the tree), so memory stays proportional to what is found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from npu_migrate.core.diagnostics import Diagnostic


@dataclass
class Site:
    """A CUDA code location and what `apply` does about it: actions are (code, 'fix'|'flag'|'policy',
    message); status is one of classify.STATUSES once the engine's results are in."""

    kind: str
    line: int
    col: int
    what: str
    actions: list[tuple[str, str, str]] = field(default_factory=list)
    status: str = "manual"


@dataclass
class ModuleClass:
    """A class of the project that may be an nn.Module (decided across files by its bases)."""

    name: str
    line: int
    bases: list[str]  # last name of each base
    is_torch: bool  # derives directly from a torch nn container class
    layers: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, type, line)
    submodules: list[tuple[str, int]] = field(default_factory=list)  # (class name, line)
    repeated: int = 0  # line of a ModuleList / Sequential built from a loop (0 = none)
    stacks: list[dict] = field(default_factory=list)  # blocks.StackScan records
    widths: list[int] = field(default_factory=list)  # literal output widths of its own layers
    layer_parameters: list[tuple[str, bool]] = field(default_factory=list)  # (layer type, has parameters)
    own_parameters: bool = False  # builds an nn.Parameter itself


@dataclass
class FileScan:
    path: str
    error: str | None = None
    sites: list[Site] = field(default_factory=list)
    classes: list[ModuleClass] = field(default_factory=list)
    ops: list[tuple[str, int, int]] = field(default_factory=list)  # (callable, line, col)
    distributed: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, what, line)
    collectives: list[tuple[str, int]] = field(default_factory=list)
    third_party: list[tuple[str, str, int]] = field(default_factory=list)  # (entry key, detail, line)
    amp: list[tuple[str, int]] = field(default_factory=list)  # (what, line)
    autocasts: list[tuple[int, str | None, Any]] = field(default_factory=list)  # (line, dtype, device)
    dataloaders: list[dict[str, Any]] = field(default_factory=list)  # constructions (loaders.LoaderScan)
    loader_candidates: list[dict[str, Any]] = field(default_factory=list)  # calls resolved across files
    loader_classes: list[str] = field(default_factory=list)  # DataLoader subclasses defined here
    loader_factories: list[str] = field(default_factory=list)  # functions returning a loader
    samplers: list[dict[str, Any]] = field(default_factory=list)  # torch.utils.data sampler constructions
    train_loops: list[tuple[int, int]] = field(default_factory=list)  # (line, col)
    accumulation: list[str] = field(default_factory=list)  # evidence of gradient accumulation (guards, micro-step loops)
    checkpointing: bool = False  # torch.utils.checkpoint in use
    findings: list[Diagnostic] = field(default_factory=list)
    engine_error: str | None = None
    # what `apply --check` says of the file: whether it would change, its diagnostics by severity
    apply_changed: bool = False
    apply_failed: bool = False
    apply_severities: dict[str, int] = field(default_factory=dict)
    apply_only: bool = False  # a file apply reads that analyze does not (a notebook, requirements...)
