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
* msMemScope frees written after `ACL_FINI` or marked `shadow` are the tool's exit clean-up:
  those blocks count as never freed. Rows without a Python stack are named by their `owner`.

## What to do
Keep a number, not the tensor (`loss.item()`), bound caches, or `del` the reference. Confirm
with `npu-migrate memory blocks FILE --state active_allocated` that the blocks are really
unneeded: a cache bounded elsewhere is not a leak.
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
trace records them; reserved bytes are segment sizes.

## What to do
Look at the largest sites and categories at the peak; lower them (checkpointing, smaller
batch, freeing references earlier).
""",
    "MEM005": """# MEM005 wasteful blocks

## What it means
Blocks live at the peak although their lifetime suggests they were allocated too early, freed
too late or idle.

## Why
Memory held at the peak but not needed then raises the peak for nothing.

## Evidence
Snapshots record no accesses, so the rules are heuristics against the peak and the steps: with
steps, *held into the peak step* and *idle across steps*; without, *allocated long before the
peak* and *freed long after the peak* (a quarter of the trace). msMemScope ACCESS events are
judged as MindStudio Insight does: *lazy_used*, *delayed_free*, *long_idle* when the gap is over
half the block's lifetime. Reported when such blocks hold 5% of the peak or more.

## What to do
`del` references at the end of an iteration; allocate closer to first use. Deliberate
prefetching or caching can be flagged too: check the block view.
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
""",
}
