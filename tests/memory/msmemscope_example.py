"""msMemScope's own leak-compare example, rebuilt as realistic `memscope_dump` CSV exports.

    python tests/memory/msmemscope_example.py    # rewrites fixtures/memory/msmemscope_compare/

Format facts, as msMemScope writes them (Ascend/msmemscope @ f069acfa: example/compare/
baseline.csv and leaks.csv, its README, docs/en/user_guide/output_file_spec.md):

* columns `ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,
  Call Stack(Python),Call Stack(C)`; stacks empty when not collected;
* OP_LAUNCH rows `ATEN_START`/`ATEN_END` name the operator (`torch._ops.aten.addmm.default`),
  Device Id and Ptr `N/A`; the backward runs on a second thread of the same process;
* MALLOC/FREE rows of the PTA pool carry `{allocation_id:N,addr:0x...,size:N,total:N,used:N}`
  (Ptr 16 hex digits); HAL rows (driver memory) `{allocation_id:N,addr:0x...,size:N}`;
* `SYSTEM START_TRACE` / `STOP_TRACE` bracket the run; the rows are not in ID order: operator
  rows first, then each block's MALLOC with its FREE, HAL blocks, blocks never freed, SYSTEM;
* the run: two steps of a one-layer regression (t, addmm, mse_loss with a 16 MiB workspace,
  ones_like, backward on a second thread, SGD `_foreach_add_`); the leak version also makes a
  1000x1000 float32 input per step (`randn` then `_to_copy` to the device: 4,000,256 B) and
  never frees it, so 2 x 4,000,256 B stay allocated at the end where the baseline keeps 3 KiB.

The generator is ours; only the shape of the run and the format come from the example.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path

HEADER = ["ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id", "Thread Id",
          "Device Id", "Ptr", "Attr", "Call Stack(Python)", "Call Stack(C)"]
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "memory" / "msmemscope_compare"
PROCESS, MAIN, BACKWARD = 3290097, 3290097, 3291992
MiB = 1 << 20
INPUT_BYTES = 4_000_256  # a 1000x1000 float32 tensor, rounded up by the pool
POOL_STEP = 18 * MiB + 2 * MiB  # the pool grows by a driver segment of 18 MiB + 2 MiB


@dataclass
class Block:
    allocation_id: int
    addr: int
    size: int
    rows: list[list[object]] = field(default_factory=list)


@dataclass
class Export:
    """Rows of one run, as msMemScope records them."""

    clock: int
    rows: list[list[object]] = field(default_factory=list)
    next_allocation: int = 1
    total: int = 2 * MiB
    used: int = 0
    next_small: int = 0x12C041201000
    hal: list[Block] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)

    def row(self, event: str, kind: str, name: str = "N/A", thread: int = MAIN,
            device: str = "N/A", ptr: str = "N/A", attr: str = "") -> list[object]:
        self.clock += 211_337
        record: list[object] = [len(self.rows) + 1, event, kind, name, self.clock, PROCESS,
                                thread, device, ptr, attr, "", ""]
        self.rows.append(record)
        return record

    def op(self, name: str, thread: int = MAIN) -> _Op:
        return _Op(self, f"torch._ops.aten.{name}", thread)

    def driver(self, size: int, addr: int, thread: int = MAIN) -> Block:
        block = Block(self.next_allocation, addr, size)
        self.next_allocation += 1
        block.rows.append(self.row("MALLOC", "HAL", thread=thread, device="0",
                                   ptr=f"0x{addr:016x}",
                                   attr=f"{{allocation_id:{block.allocation_id},"
                                        f"addr:0x{addr:016x},size:{size}}}"))
        self.hal.append(block)
        return block

    def malloc(self, size: int, thread: int = MAIN, addr: int | None = None) -> Block:
        if addr is None:
            addr, self.next_small = self.next_small, self.next_small + max(size, 512)
        block = Block(self.next_allocation, addr, size)
        self.next_allocation += 1
        self.used += size
        block.rows.append(self.row("MALLOC", "PTA", thread=thread, device="0",
                                   ptr=f"0x{addr:016x}", attr=self._attr(block)))
        self.blocks.append(block)
        return block

    def free(self, block: Block, thread: int = MAIN) -> None:
        self.used -= block.size
        block.rows.append(self.row("FREE", "PTA", thread=thread, device="0",
                                   ptr=f"0x{block.addr:016x}", attr=self._attr(block)))

    def free_driver(self, block: Block) -> None:
        block.rows.append(self.row("FREE", "HAL", device="0", ptr=f"0x{block.addr:016x}",
                                   attr=f"{{allocation_id:{block.allocation_id},"
                                        f"addr:0x{block.addr:016x},size:{block.size}}}"))

    def _attr(self, block: Block) -> str:
        return (f"{{allocation_id:{block.allocation_id},addr:0x{block.addr:016x},"
                f"size:{block.size},total:{self.total},used:{self.used}}}")

    def ordered(self) -> list[list[object]]:
        """msMemScope's file order: operators, freed blocks (MALLOC then FREE), driver blocks,
        blocks never freed, SYSTEM rows."""
        ops = [r for r in self.rows if r[1] == "OP_LAUNCH"]
        freed = [b for b in self.blocks if len(b.rows) == 2]
        freed.sort(key=lambda b: int(b.rows[1][0]))  # type: ignore[call-overload]
        kept = [b for b in self.blocks if len(b.rows) == 1]
        system = [r for r in self.rows if r[1] == "SYSTEM"]
        return (ops + [r for b in freed for r in b.rows] + [r for b in self.hal for r in b.rows]
                + [b.rows[0] for b in reversed(kept)] + system)


class _Op:
    def __init__(self, export: Export, name: str, thread: int):
        self.export, self.name, self.thread = export, name, thread

    def __enter__(self) -> Export:
        self.export.row("OP_LAUNCH", "ATEN_START", self.name, self.thread)
        return self.export

    def __exit__(self, *exc: object) -> None:
        self.export.row("OP_LAUNCH", "ATEN_END", self.name, self.thread)


SEGMENTS = (0x12C041400000, 0x12C042800000)  # the 18 MiB driver segments of the two steps
INPUTS = (0x12C041400000, 0x12C0417D0A00)  # where the leak version's inputs land


def run(leak: bool, clock: int) -> list[list[object]]:
    """Two training steps; with `leak`, each step also makes an input that is never freed (it
    pins the step's driver segment, so the second step needs a new one)."""
    x = Export(clock)
    x.row("SYSTEM", "START_TRACE")
    output = loss = None
    grads: list[Block] = []
    segment = None
    for step in range(2):
        with x.op("t.default"):
            pass
        with x.op("addmm.default"):
            new_output = x.malloc(1536)
        if output is not None:
            x.free(output)
        output = new_output
        with x.op("mse_loss.default"):
            new_loss = x.malloc(512)
            base = SEGMENTS[step] if leak else SEGMENTS[0]
            segment = x.driver(18 * MiB, base)
            x.total += 18 * MiB
            workspace = x.malloc(16 * MiB + 1024, addr=base)
            if step == 0:
                x.driver(2 * MiB, 0x12C042600000)
            x.free(workspace)
        if loss is not None:
            x.free(loss)
        loss = new_loss
        for name in ("_record_function_enter_new.default", "_record_function_exit._RecordFunction"):
            with _Op(x, f"torch._ops.profiler.{name}", MAIN):
                pass
        for grad in grads:
            x.free(grad)
        with x.op("ones_like.default"):
            seed = x.malloc(512)
        grads = _backward(x, first=step == 0)
        x.free(seed)
        with _Op(x, "torch._ops.profiler._record_function_enter_new.default", MAIN):
            pass
        with x.op("_foreach_add_.List"):
            x.free(x.malloc(1024))
        with _Op(x, "torch._ops.profiler._record_function_exit._RecordFunction", MAIN):
            pass
        if leak:  # batch = torch.randn(1000, 1000).to(device); kept in a list, never freed
            with x.op("randn.default"):
                pass
            with x.op("_to_copy.default"):
                x.malloc(INPUT_BYTES, addr=INPUTS[step])
        else:
            x.free_driver(segment)
            x.total -= 18 * MiB
    if leak and segment is not None:
        x.free_driver(segment)
    x.row("SYSTEM", "STOP_TRACE")
    return x.ordered()


def _backward(x: Export, first: bool) -> list[Block]:
    """autograd's thread: the loss gradient, the weight and bias gradients."""
    with x.op("mse_loss_backward.default", BACKWARD):
        grad_out = x.malloc(1536, BACKWARD)
    with x.op("t.default", BACKWARD):
        pass
    with x.op("mm.default", BACKWARD):
        grad_w = x.malloc(512, BACKWARD)
        if first:
            x.driver(2 * MiB, 0x124000200000, BACKWARD)
    with x.op("t.default", BACKWARD):
        pass
    with x.op("sum.dim_IntList", BACKWARD):
        grad_b = x.malloc(512, BACKWARD)
        x.free(x.malloc(1536, BACKWARD), BACKWARD)
        if first:
            x.driver(2_815_668, 0x124000400000, BACKWARD)
    with x.op("view.default", BACKWARD):
        pass
    x.free(grad_out, BACKWARD)
    for name in ("detach.default", "detach.default", "t.default", "detach.default",
                 "detach.default"):
        with x.op(name, BACKWARD):
            pass
    return [grad_w, grad_b]


def write(path: Path, rows: list[list[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(rows)
    return path


def build(folder: Path = FIXTURES) -> tuple[Path, Path]:
    return (write(folder / "baseline.csv", run(False, 1_764_753_083_996_495_030)),
            write(folder / "leaks.csv", run(True, 1_764_753_365_727_896_900)))


if __name__ == "__main__":
    for made in build(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES):
        print(made)
