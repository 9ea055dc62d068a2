"""Documentation of every MEM code the memory analyzer can print: code -> markdown page.

`docs/rules/CODE.md` is rendered from these texts; edit them here, not there.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    "MEM001": """# MEM001 possible leak

## What it means
Blocks allocated again and again at one call site are never freed, and allocated memory grows
while they accumulate. The finding names the user's line (torch frames and the emulation layer's
frames are skipped), the blocks and bytes, and the evidence it used.

## Why
A loop should return to the same allocated level every iteration. A site that keeps something
per iteration (`losses.append(loss)` instead of `loss.item()`, outputs cached in a dict, a
growing history) grows memory until the device runs out, often hours into a run.

## Evidence
Steps come from evidence only, in this order: `--step-frame REGEX` (each run of allocations
with a frame matching `file:line function` starts a step, e.g.
`--step-frame 'optim/[a-z_]+\\.py:\\d+ step$'`); MSTX marks and range starts (msMemScope);
`ProfilerStep#N` annotations; `Optimizer.zero_grad` / `Optimizer.step` / DataLoader
annotations; runs of allocations inside `optimizer.step()`, `zero_grad()` or a DataLoader
fetch, seen in the call stacks, when they repeat. A repeating stack alone is never taken for a
step: the layers of one forward pass repeat too.

* With steps: a site leaks when blocks it allocated in at least half of the completed steps
  (two or more; the last step excluded) are never freed, and allocated memory at step starts
  grows (never on negative growth).
* Without steps ("monotone growth"): a site leaks when it has four or more never-freed blocks
  allocated steadily over the whole run (the first in its first fifth, the last in its last
  fifth, no gap over a fifth), the floor of allocated memory rises by at least half of what
  they hold, and the other sites keep at most a quarter of what they allocate meanwhile (a
  forward pass keeps its activations at many lines; a leaking loop frees all but the leak).
  The finding carries the growth curve (`curve` in JSON).
* Against a baseline (`npu-migrate memory compare A B`): an allocation identity (call stack
  plus msMemScope operator) whose blocks B leaves unfreed at the end while A, the baseline,
  leaves at most half as much there, when the difference is at least 64 KiB and 1% of the
  larger peak and B leaves more unfreed in all: few large blocks never freed, as in
  msMemScope's own leak-compare example (`evidence: compared with the baseline A`).
* msMemScope frees written after `ACL_FINI` or marked `shadow` are the tool's exit clean-up:
  those blocks count as never freed. Rows without a Python stack are named by the operator open
  on their thread (`operator aten._to_copy.default`), else by their `owner`.

## What to do
Keep a number, not the tensor (`loss.item()`), bound caches, or `del` the reference. Confirm
with `npu-migrate memory blocks FILE --state active_allocated` that the blocks are really
unneeded: a cache bounded elsewhere is not a leak.

## Example
```
$ npu-migrate memory compare fixtures/memory/msmemscope_compare/baseline.csv fixtures/memory/msmemscope_compare/leaks.csv
fixtures/memory/msmemscope_compare/leaks.csv:0:0: MEM001 device 0: possible leak at operator aten._to_copy.default: B leaves 2 blocks (7.63 MiB) allocated there unfreed at the end where the baseline A leaves 0 B; in all B leaves 7.63 MiB unfreed against 3.00 KiB (evidence: compared with the baseline fixtures/memory/msmemscope_compare/baseline.csv) (npu-migrate rules MEM001)
```
""",
    "MEM002": """# MEM002 fragmentation

## What it means
New segments were reserved while the pool held enough free memory, but only in pieces too
small for the request.

## Why
Requests of varying sizes (changing sequence lengths) leave free space in many small gaps; the
next large request finds no gap big enough and a new segment is reserved although the free
total would have sufficed. Reserved memory grows beyond what the program needs.

## Evidence
For the largest 64 `segment_alloc` events of 1 MiB or more, the pool just before the event is
rebuilt; if the same stream's non-expandable segments had at least the request free but no gap
that large, the segment was forced by fragmentation. Reported when such segments add up to 5%
of peak reserved memory or more.

## What to do
`PYTORCH_NPU_ALLOC_CONF=expandable_segments:True` (see MEM007), or pad inputs to a few fixed
shapes.

## Example
```
$ npu-migrate memory fixtures/memory/examples/training.pickle
fixtures/memory/examples/training.pickle:0:0: MEM002 device 0: fragmentation: 1 new segments (64.00 MiB, 33% of peak reserved) were reserved while the cached free memory was enough but split; e.g. after event 51 (+0.000 s) a 4.00 MiB request found 4.00 MiB free in its stream's large segments (of 4.00 MiB free in the pool: reserved minus the blocks in use or pending free) whose largest block was 3.31 MiB (npu-migrate rules MEM002)
```
""",
    "MEM003": """# MEM003 out of memory

## What it means
The trace holds an `oom` event: what was asked, what was live and free, and whether a better
layout would have fit the request.

## Why
An OOM because no free block was large enough is fragmentation (fix the allocator settings);
an OOM because the request exceeded everything free means the peak itself is too high.

## Evidence
The `oom` event's size and `device_free`, with the pool rebuilt at that event: cached free
memory, its largest block, and the sites holding the most memory.

## What to do
Fragmentation: expandable segments (MEM007). Too high a peak: smaller batch, activation
checkpointing, mixed precision or offloading.

## Example
```
$ npu-migrate memory fixtures/memory/examples/oom.pickle
fixtures/memory/examples/oom.pickle:0:0: MEM003 device 0: out of memory at event 409 (+0.003 s): asked 48.00 GiB with 64.00 MiB allocated, 192.00 MiB reserved, 2.00 GiB free on the device; it did not fit even with the cache compacted: 45.88 GiB short; lower the peak (smaller batch, activation checkpointing, mixed precision); largest holder train.py:46 (train_step) (npu-migrate rules MEM003)
```
""",
    "MEM004": """# MEM004 peak memory

## What it means
Where the allocated peak is, how high it is, and what is live then by call site and category.

## Why
The peak decides whether a model fits.

## Evidence
The trace is replayed anchored on the exact dump-time `segments`, so the state before the first
recorded event is known and counted: a ring-buffer-truncated trace that starts with frees
reports the true peak, at "before the first recorded event" (event -1 in JSON). Without
dump-time segment state (msMemScope rows, a trace without segments) the peak is a lower bound
and the finding says so (`exact: false` in JSON). Allocated bytes are requested sizes, as the
trace records them; reserved bytes are segment sizes. The JSON report gives, per device,
`at_peak`: the allocation identities (stack + operator) holding the most at the peak with their
frames, and the totals by operator, thread and stream; `npu-migrate memory flame FILE [--event
N] [--by frame|operator|thread|stream]` prints the same as a tree (or `--folded` stacks for
flame-graph tools), and the HTML page draws it at any event. `compare` says how the peak changed
and at which identities.

## What to do
Look at the largest sites and categories at the peak; lower them (checkpointing, smaller
batch, freeing references earlier).

## Example
```
$ npu-migrate memory fixtures/memory/examples/training.pickle
fixtures/memory/examples/training.pickle:0:0: MEM004 device 0: peak allocated 135.22 MiB at event 1192 (+0.008 s) with 192.00 MiB reserved; largest site train.py:41 (train_step) holds 70.31 MiB (52%) (npu-migrate rules MEM004)
```
""",
    "MEM005": """# MEM005 inefficient blocks

## What it means
Blocks held at the peak while nothing uses them: allocated long before their first use, freed
long after their last, or idle in between.

## Why
Memory held at the peak but not needed then raises the peak for nothing.

## Evidence
* msMemScope exports with ACCESS rows, per block, as MindStudio Insight judges them:
  *lazy_used* (first access later than the threshold after the alloc), *delayed_free* (free
  later than the threshold after the last access), *long_idle* (two accesses further apart
  than the threshold). A threshold is a share of the block's lifetime (default 50%) or a time:
  `--lazy`, `--delayed`, `--idle` (e.g. `--idle 2ms`), and the same fields in the HTML page.
* Snapshot pickles record no accesses, so a block counts as in use unless it is *held across
  iterations until replaced*: two generations of one call stack coexist at the peak, the older
  is freed as the newer arrives (`out = model(x)`: the old output dies when the name is
  rebound), and between the two allocations the memory that stood when the older was made
  (never-freed one-offs such as gradients left out) fell by at least half its size and a tenth
  of the peak, as a backward gives back the activations. An attention mask every layer reads,
  activations kept for the backward, a batch prefetched a step ahead or a layer's output read
  by the next layer are not flagged.
* Reported when the idle blocks live at the peak hold 5% of it or more; the finding lists only
  the kinds found. `bench/memory_inefficient_review.md` holds the review by hand.

## What to do
`del` a reference once it is used (`del logits` after the backward) or restructure the loop so
the old value is dropped before the next one is computed; allocate closer to first use.

## Example
```
$ npu-migrate memory fixtures/memory/examples/stale_logits.pickle
fixtures/memory/examples/stale_logits.pickle:0:0: MEM005 device 0: 16.00 MiB (22% of the peak) is held at the peak by blocks held across iterations until replaced; largest: train.py:42 (train_step) (held across iterations until replaced) (heuristic, a snapshot has no access events: two generations of one stack at the peak, the older freed as the newer arrived, after an iteration's memory was given back) (npu-migrate rules MEM005)
```
""",
    "MEM006": """# MEM006 truncated history

## What it means
The trace starts after the program did: blocks and segments existed before its first event.

## Why
`_record_memory_history(max_entries=N)` keeps a ring buffer, and recording enabled late misses
the start; analyses that need the missing part cannot see it.

## Evidence
Blocks freed without a recorded alloc, live blocks without one (ghost blocks), reserved memory
before the first event, or `allocator_settings.trace_alloc_overflowed`. Totals are rebuilt
backwards from the exact dump-time state.

## What to do
Record earlier or with a larger `max_entries` for the whole history.

## Example
```
$ npu-migrate memory fixtures/memory/examples/ring_buffer_cut.pickle
fixtures/memory/examples/ring_buffer_cut.pickle:0:0: MEM006 device 0: the trace starts mid-run: 128.00 MiB reserved and 128.00 MiB allocated before its first event; 16 blocks were allocated earlier (0 still live at the end, their stacks from the final segments); totals are rebuilt backwards from the dump-time state; the ring buffer overflowed (npu-migrate rules MEM006)
```
""",
    "MEM007": """# MEM007 allocator advice

## What it means
Allocator settings that address what the other findings show, in the producer's own terms.

## Why
PyTorch and torch_npu snapshots take `PYTORCH_NPU_ALLOC_CONF` (`PYTORCH_CUDA_ALLOC_CONF` on
CUDA); TensorFlow sources on Ascend take `MemoryConfig(...)`; neither applies to the other, and
nothing is advised for other frameworks.

## Evidence
Fragmentation (MEM002) or an OOM that would have fit (MEM003): `expandable_segments:True`; the
same with expandable segments already on: compare with them off plus `max_split_size_mb:<N>`
(90th percentile of block sizes over 1 MiB, rounded up to a power of two); reserved over 1 GiB
and more than 30% above allocated at its peak: `garbage_collection_threshold:0.8`. torch_npu
rejects `max_split_size_mb` or `garbage_collection_threshold` next to
`expandable_segments:True`; the advice never combines them. TensorFlow: `static_memory_policy=3`
for fragmentation, `atomic_clean_policy=1` when memory is short.

## What to do
Set the variable before the process starts; measure speed and peak after the change.

## Example
```
$ npu-migrate memory fixtures/memory/examples/training.pickle
fixtures/memory/examples/training.pickle:0:0: MEM007 allocator advice: set PYTORCH_NPU_ALLOC_CONF="expandable_segments:True" (PYTORCH_CUDA_ALLOC_CONF on CUDA); never combine expandable_segments:True with max_split_size_mb or garbage_collection_threshold (torch_npu refuses it) (npu-migrate rules MEM007)
```
""",
    "MEM008": """# MEM008 pending frees

## What it means
Freed blocks stay out of the pool for a while because another stream may still use them.

## Why
A tensor used on a second stream (`record_stream`) becomes `active_pending_free` when freed and
is reused only when that stream's work is done.

## Evidence
The largest amount held this way (frees whose completion did not follow immediately), reported
when it reaches 1% of the peak, with its main site.

## What to do
Synchronise the side stream earlier, or allocate on the stream that uses the tensor.

## Example
```
$ npu-migrate memory fixtures/memory/examples/pending_free.pickle
fixtures/memory/examples/pending_free.pickle:0:0: MEM008 device 0: 3.00 MiB was freed but still held for other streams (active_pending_free) at event 410 (+0.003 s); largest: train.py:41 (train_step); record_stream keeps blocks until the other stream's work completes (npu-migrate rules MEM008)
```
""",
    "MEM009": """# MEM009 inconsistent input

## What it means
The input contradicts itself: its structure and its frames name different allocators, or it
shows more memory allocated than reserved.

## Why
Findings are only as good as the numbers they stand on. A CUDA snapshot read as torch_npu gets
advice for the wrong allocator; reserved memory below allocated memory means the reserved
figures (and so fragmentation and allocator advice) are incomplete.

## Evidence
* Label against content: the structure suggests torch_npu (no `time_us`, no
  `allocator_settings`, workspace entries) or CUDA, while frames name only the other
  allocator's code (`c10::cuda`, `CUDACachingAllocator`, `torch/cuda/` against `torch_npu`,
  `NPUCachingAllocator`). The content wins: the snapshot is read as what its frames say.
* Allocated above reserved after any event (where reserved memory is recorded at all): a pool
  cannot hand out more than it holds. msMemScope rows whose `used` exceeds their pool `total`
  give this.

## What to do
Check how the file was produced (which build of msMemScope, whether `segment_*` events were
skipped). Read reserved-memory findings of such a file with care.

## Example
```
$ npu-migrate memory fixtures/memory/examples/memscope_dump_used_over_total.csv
fixtures/memory/examples/memscope_dump_used_over_total.csv:0:0: MEM009 device 0: allocated memory exceeds reserved memory at 2 events, from event 3 (+0.000 s); worst at event 4 (+0.000 s): 4.00 MiB allocated with 2.00 MiB reserved. A pool cannot hand out more than it holds, so the reserved figures (the pool 'total' of its MALLOC/FREE rows) are incomplete, and so are the fragmentation and allocator advice built on them (npu-migrate rules MEM009)
```
""",
}
