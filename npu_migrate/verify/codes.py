"""The diagnostic codes `npu-migrate verify` prints, documented: code -> markdown page
(rendered to docs/rules/CODE.md by the docs generator)."""

from __future__ import annotations

CODES: dict[str, str] = {
    "VER001": """# VER001 numerical divergence

## What it means

The migrated code computes different numbers from the original, beyond what the device's precision
explains. The finding is the first place where that happens, at the migrated tree's `path.py:LINE`.

## Why

In script mode the verifier runs your real script in both trees and records every aten op (and every
`backward()` loss) with the line of your code that called it. The two op streams are aligned (op name
and output shapes); ops only one side runs (a fused `npu_rms_norm` in place of a hand-written RMSNorm)
are skipped and the comparison resumes at the next op both run. An op diverges when its
norm-relative distance to the original exceeds `noise_factor` times the distance a device-precision
(HF32) run of the original shows at that op, plus a floor for its dtype (docs/verify.md). In model
mode (`--entry`) the same code names the first module whose outputs break the pass rule.

## Evidence

The message names the op, the step (`before the first step` covers model construction and the first
forward), the module it ran in and the line that built that module, the distance and the tolerance.
When the migrated code runs ops the original does not right before the divergence (a bf16 round
trip, an extra scale), their line is given too.

## What to do

Open the line in both trees. A changed constant, initialisation, epsilon, loss reduction or dtype
shows here. If the difference is intended (a fused kernel with another accumulation order), raise
`--noise-factor`, or run with `--device-precision` so the emulation computes as the device does.
""",
    "VER002": """# VER002 the migrated code raised

## What it means

The migrated script (or entry point) raised an exception that the original did not raise.

## Why

The verifier runs both sides to completion of the requested steps; an exception on the migrated side
only means the migration broke something the original needed (an API the emulation or the device
lacks, a wrong device string, a missing import).

## Evidence

The message carries the exception type and message; the location is the innermost line of the
traceback inside the migrated tree.

## What to do

Read the traceback line in the migrated tree. For an emulation gap (`EmulationError`), check
docs/emulation.md: a torch_npu custom operator without a reference implementation cannot run off the
device.
""",
    "VER003": """# VER003 over a memory budget

## What it means

The migrated side's peak memory broke `--max-peak` or `--max-peak-ratio` (model or script mode).

## Why

Peak memory is measured over the training steps on both sides: the device allocator's statistics on
an accelerator; on the CPU, the profiler's allocation events in model mode and the live storages of
the ops' outputs in script mode (docs/verify.md, "Peak memory", "Peak memory in script mode").

## Evidence

The message gives the measured peak (or ratio) and the budget, and where the growth comes from. In
model mode: the module whose recorded tensors (outputs, parameters, gradients, buffers) grew most
from the reference to the migrated side, with its class and line; the finding is placed at that
line. In script mode: a hook only the migrated code registers (a forward hook that keeps every
activation, and its autograd graph, alive), else the line whose tensors alive at the peak grew most.

## What to do

Look at the named module first (a dtype widened to float64, an extra copy, a lost AMP region);
compare the peak-memory table of both sides; AMP, activation checkpointing or a smaller batch lower
the peak. Raise the budget if the growth is expected.
""",
    "VER004": """# VER004 a CPU tensor meets an NPU tensor

## What it means

The migrated code uses a tensor left on the CPU in a computation with tensors on the NPU. A device
raises `Expected all tensors to be on the same device`; the emulation raises the same error.

## Why

The emulated NPU is a device of its own: its tensors report `npu:N` and every operator checks the
devices of its inputs, raising on a CPU/NPU mix as a device does (CPU scalars, 0-dimensional
tensors, are allowed, as on a device). The placement audit the verifier turns on also records the
user's line where each CPU tensor is made, so the error can name it.

## Evidence

The message names the call, the line that raised it, and the line where the CPU tensor was made. In
script mode it also names the original's device move (`.to(device)`, `.cuda()`) that the migrated
code no longer makes, with the migrated line standing at its place. A move the migrated code no
longer makes is reported even when no op met the host tensor with device tensors in the steps the
run took (a Transformer's causal mask is dropped in training and used at evaluation): the finding
is then at the migrated line standing at the move's place.

## What to do

Move the tensor to the device where it is made (`device=...`) or before it is used (`.to(device)`).
""",
    "VER005": """# VER005 the random seed differs

## What it means

The migrated code seeds a random generator with another value than the original (or seeds where the
original does not), so initialisation, data order and dropout differ from the first random draw.

## Why

Script mode records every call to `torch.manual_seed`, `random.seed` and `numpy.random.seed` with its
value and line, and compares them in order, before any numbers are compared.

## Evidence

The message gives both values; the location is the seeding line in the migrated tree.

## What to do

Seed as the original does. Device-specific seeding (`torch.npu.manual_seed`) is in addition to, not
in place of, `torch.manual_seed`.
""",
}
