"""The documentation page of every ANA code: code -> markdown (first line `# CODE title`, then
the sections What it means, Why, Evidence, What to do). `docs/rules/ANA*.md` are rendered from
these texts; edit them here."""

from __future__ import annotations

CODES: dict[str, str] = {
    "ANA001": """\
# ANA001 cuda-automatic

## What it means

CUDA code that `npu-migrate apply` rewrites. Severity: info. Reported by `npu-migrate analyze`.

```python
model = Net().cuda()          # ANA001: NPU101 rewrites `.cuda()` → `.npu()`
state = torch.load(p, map_location="cuda:0")   # ANA001: NPU103
```

## Why

A CUDA-specific line that `npu-migrate apply` already knows how to rewrite: device strings, `.cuda()`, `torch.cuda.*` calls, `nccl` backends, CUDA environment variables. The finding names the rule code, so the assessment shows how much of the port is mechanical.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The scanner's location (`.cuda()`, a `torch.cuda` name, a `'cuda'` string...) and the engine's edit on the same line or statement, by rule code: the same run of the engine that `apply` makes.

## What to do

Information only. Running `npu-migrate apply` makes the change; the rule's own page describes its safety.
""",

    "ANA002": """\
# ANA002 cuda-manual

## What it means

CUDA code that needs a person: no rule of `npu-migrate apply` rewrites or reports the line (or its statement). Severity: warning. Reported by `npu-migrate analyze`.

```python
arg = "cuda:0"                 # ANA002: a device string outside any device position
device = torch.device(arg)
```

## Why

A CUDA-specific line that no rule rewrites or reports: a device string kept in a variable, a
`torch.cuda` API no rule maps. Lines a rule reports are ANA003, lines the rule selection
leaves are ANA004, so an ANA002 row never contradicts `apply`. Each one is work for a person
and counts in the complexity rating and the effort estimate.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The scanner's location, and that neither the selected rules nor any other rule edits or reports the line or its statement.

## What to do

Change the line by hand; if the pattern is common, it is a candidate for a new rule.
""",

    "ANA003": """\
# ANA003 cuda-reported

## What it means

CUDA code that a rule of `npu-migrate apply` reports but does not rewrite, because the right
change depends on intent: TensorRT calls, `torch.backends.cudnn` flags, `CUBLAS_WORKSPACE_CONFIG`,
a Triton kernel. Severity: warning. Reported by `npu-migrate analyze`.

```python
torch.backends.cudnn.benchmark = True     # ANA003: NPU161 reports: no effect on NPU
```

## Why

`apply` prints the same diagnostic for the line, with its advice. The row says so, so the
assessment and `apply` never disagree: the work is a person's, but it is guided. It counts in
the effort estimate as reported work (less than a line no rule covers).

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): the rule code that reports the line, with its message, from the same engine run as `apply`.

## What to do

Read the rule's page (`npu-migrate rules CODE`) and apply its advice by hand.
""",

    "ANA004": """\
# ANA004 cuda-policy

## What it means

CUDA code that a rule would rewrite or report, but the current rule selection leaves it:
the rule is not in `select`, is in `ignore` or `per-file-ignores`, or is off by default (the
opt-in insertions). Severity: info. Reported by `npu-migrate analyze`.

```toml
[tool.npu-migrate]
ignore = ["NPU130"]       # `torch.cuda.amp.autocast()` lines become ANA004
```

## Why

`apply` with this configuration leaves the line as it is, on purpose. `analyze` runs the
engine once more with every rule on files that still have untouched lines, to tell these
lines from the ones no rule covers (ANA002).

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): the rule code that would edit or report the line when every rule runs, and that the selection leaves it out.

## What to do

Nothing, if the policy is intended; otherwise select the rule (`--select CODE` or `enable`).
""",

    "ANA010": """\
# ANA010 distributed-setup

## What it means

A distributed set-up and what changes for HCCL. Severity: info. Reported by `npu-migrate analyze`.

```python
dist.init_process_group(backend="nccl")   # ANA010 process group: nccl -> hccl
model = DDP(model, device_ids=[rank])      # ANA010 DDP: ints or npu:N device ids
```

## Why

Distributed training code changes when it moves from NCCL to HCCL: the backend name, device ids, launcher environment, and for DeepSpeed or Megatron-style model parallelism the framework's NPU support. The finding names the set-up (DDP, FSDP, DeepSpeed, Megatron-style, device mesh, process group, launcher) and what changes for HCCL.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The call, import or launcher line that sets up distributed training (`init_process_group`, `DistributedDataParallel`, `FullyShardedDataParallel`, `deepspeed.initialize`, Megatron `parallel_state`, `torchrun`).

## What to do

Information only. The backend and device rewrites themselves are done by the NPU14x rules.
""",

    "ANA020": """\
# ANA020 third-party-cuda

## What it means

Custom or third-party CUDA code, with its NPU route. Severity: warning. Reported by `npu-migrate analyze`.

```python
from flash_attn import flash_attn_func    # ANA020 flash-attn → torch_npu.npu_fusion_attention
ext = CUDAExtension('ext', ['k.cu'])      # ANA020 CUDA extension → Ascend C / op-plugin
```

## Why

Custom CUDA code has no NPU build: `.cu` sources, `CUDAExtension`, Triton kernels, flash-attn, xformers, apex fused ops, bitsandbytes, CuPy and similar. Each needs a port or a replacement, and they dominate the migration effort. The finding gives the NPU route for each (for example flash-attn → `torch_npu.npu_fusion_attention` or `F.scaled_dot_product_attention`).

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The import, call, decorator or file that brings in custom CUDA code (a `.cu` file, `CUDAExtension`, `load_inline(cuda_sources=...)`, `@triton.jit`, a library such as flash-attn or TensorRT).

## What to do

No automatic fix: porting a kernel is a design decision.
""",

    "ANA030": """\
# ANA030 cpu-fallback-risk

## What it means

An operator without an NPU kernel: it may fall back to the CPU. Severity: warning. Reported by `npu-migrate analyze`.

```python
values, vectors = torch.linalg.eigh(cov)   # ANA030: aten::_linalg_eigh has no NPU kernel
```

## Why

torch_npu registers NPU kernels for a list of aten operators (op-plugin's `op_plugin_functions.yaml`, shipped as `npu_migrate/core/data/npu_aten_ops.tsv`). A call that certainly lands on an operator missing from that list runs on the CPU: the inputs are copied to the host and back, with a warning (or an error with `TORCH_NPU_FALLBACK_CPU_DISABLE=1`). Only calls whose aten operators are certain are checked; composites are reported as unmapped in the support table instead.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The operator call and the aten operators it lands on, none of which is in the NPU kernel list (`npu_aten_ops.tsv`) for the chosen torch_npu version.

## What to do

No automatic fix. Move the computation to the CPU explicitly (once, outside the hot path), or replace the operator.
""",

    "ANA031": """\
# ANA031 fusion-opportunity

## What it means

Operators that a fused NPU API or torch.compile can serve in one kernel. Severity: info. Reported by `npu-migrate analyze`.

```python
attn = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)   # ANA031 attention
# after: F.scaled_dot_product_attention(q, k, v) or torch_npu.npu_fusion_attention(...)
```

## Why

Ascend NPUs run fused kernels for common operator sequences, and torch.compile fuses element-wise chains. The analyzer finds: Linear + activation, Conv + BatchNorm (+ activation), hand-written attention (softmax over a matmul), SwiGLU / GEGLU gates, hand-written RMS norm, residual add + layer norm / RMS norm, rotary embeddings (`rotate_half`), and long element-wise chains in `forward`. Each finding names the NPU API that serves the pattern.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The operator sequence in `forward` (or a `Sequential`) that the fused API serves.

## What to do

No automatic fix: fused APIs have their own argument conventions (layouts, masks) to check by hand.
""",

    "ANA032": """\
# ANA032 amp-opportunity

## What it means

Training without mixed precision. Severity: info. Reported by `npu-migrate analyze`.

```python
for x, y in loader:            # ANA032: no autocast in the project
    loss = crit(model(x), y)
# after:
    with torch.autocast('npu', dtype=torch.bfloat16):
        loss = crit(model(x), y)
```

## Why

A training loop without autocast runs every matmul and convolution in fp32. On Ascend, bf16 autocast runs them on the Cube units at a higher rate and about halves activation memory; bf16 needs no GradScaler. The finding sits on each training loop when the project uses no AMP anywhere.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The training loop (its line and its `.backward()` call) and that no autocast or GradScaler is used anywhere in the project.

## What to do

`npu-migrate apply --enable amp` inserts autocast (an opt-in rule); check accuracy after enabling it.
""",

    "ANA034": """\
# ANA034 tuning-computation

## What it means

Ascend-specific tuning in the computation section of `npu-migrate analyze`: fused optimizers (NPU600), compile mode for dynamic shapes (NPU601), fused operators (NPU610-NPU613), the launch environment (NPU620, NPU621). Each finding is
what one opt-in `tune` rule would change on that line (or, at medium confidence, why it would
not), with the expected effect and the command that applies it (docs/tune.md).

```text
train.py:51:17: ANA034 fused optimizer: `torch.optim.AdamW` -> `torch_npu.optim.NpuFusedAdamW` ... (`npu-migrate apply --enable fused-optimizer`, NPU600)
```

## Why

Huawei's ModelZoo ports add this tuning to the upstream code they port; the CUDA code has none of
it. `analyze` runs the `tune` family (`apply --enable tune`) on the file with the engine, so a
finding claims exactly what `apply` would do.

## Evidence

The line and its text, and the rule (code and name) that rewrites or reports it; confidence
high for a rewrite, medium for a report (the rule explains why it leaves the line).

## What to do

`npu-migrate apply --enable tune PATH` (or `--enable <rule name>`), then `npu-migrate verify`
original against tuned; the `target-version` setting keeps every rewrite within the torch_npu
release you run.
""",
    "ANA049": """\
# ANA049 tuning-memory

## What it means

Ascend-specific tuning in the memory section of `npu-migrate analyze`: static shapes with `drop_last=True` on training loaders (NPU602), pinned memory and non-blocking copies (NPU410). Each finding is
what one opt-in `tune` rule would change on that line (or, at medium confidence, why it would
not), with the expected effect and the command that applies it (docs/tune.md).

```text
train.py:53:14: ANA049 static shapes: added `drop_last=True` (training loader ...) (`npu-migrate apply --enable static-shapes`, NPU602)
```

## Why

Huawei's ModelZoo ports add this tuning to the upstream code they port; the CUDA code has none of
it. `analyze` runs the `tune` family (`apply --enable tune`) on the file with the engine, so a
finding claims exactly what `apply` would do.

## Evidence

The line and its text, and the rule (code and name) that rewrites or reports it; confidence
high for a rewrite, medium for a report (the rule explains why it leaves the line).

## What to do

`npu-migrate apply --enable tune PATH` (or `--enable <rule name>`), then `npu-migrate verify`
original against tuned; the `target-version` setting keeps every rewrite within the torch_npu
release you run.
""",
    "ANA033": """\
# ANA033 loss-scaling

## What it means

Mixed precision whose loss scaling is wrong for its dtype. Reported by `npu-migrate analyze`
(severity warning when fp16 autocast has no GradScaler, info when a GradScaler serves bf16 only).

```python
with torch.autocast("cuda", dtype=torch.float16):   # ANA033: no GradScaler anywhere
    loss = model(x)
loss.backward()
```

## Why

fp16 has a narrow exponent range: small gradients underflow to zero unless the loss is scaled
up before `backward()` and the gradients scaled down before the step, which is what
`torch.amp.GradScaler('npu')` does. bfloat16 has fp32's range and needs no scaling; a scaler
there only adds a check of every gradient per step. The default autocast dtype on CUDA and on
NPU is float16.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): the autocast call and its dtype (medium confidence when the dtype is the default), and whether any GradScaler exists in the analysed files. An autocast whose dtype is an expression (`dtype=ptdtype`) is not judged.

## What to do

fp16: add `scaler = torch.amp.GradScaler("npu")`, `scaler.scale(loss).backward()`,
`scaler.step(optimizer)`, `scaler.update()`; or switch to `dtype=torch.bfloat16` (Ascend A2/A3
run bf16 natively). bf16 only: the scaler can go.
""",

    "ANA040": """\
# ANA040 dataloader-settings

## What it means

A DataLoader whose settings hold the NPU back. Severity: info. Reported by `npu-migrate analyze`.

```python
loader = DataLoader(ds, batch_size=8)   # ANA040: num_workers=0, pin_memory off, drop_last off
# after:
loader = DataLoader(ds, batch_size=8, num_workers=8, pin_memory=True, persistent_workers=True, drop_last=True)
```

## Why

DataLoader settings decide whether the NPU waits for data: `num_workers=0` loads in the training process, pinned memory is needed for asynchronous host-to-device copies, workers restarted each epoch cost time, and a smaller last batch changes shapes (operators are compiled again for new shapes). The DataLoaders table lists every setting with its value or default, and the finding lists the recommendations. DataLoaders built from `**kwargs` get no advice (their settings are unknown). Loaders are found through `DataLoader` itself, project subclasses (`class InfiniteDataLoader(dataloader.DataLoader)`), local names bound to them, and factories (functions returning a loader, whose callers decide the role). `drop_last=True` is advised only for training loaders: never for a validation or test loader (it would drop samples from the evaluation), and a factory that builds both is told to set it for training only. With a `batch_sampler` no batch-size or drop-last advice is given; a project subclass gets no `persistent_workers` advice (it manages its workers).

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The DataLoader construction (or the call of a DataLoader subclass or factory), each setting's value, and the loader's role (training or evaluation) with what decided it: its name, its dataset, a `model.eval()`/`no_grad` context, or the loop that consumes it.

## What to do

No automatic fix: worker counts depend on the host.
""",

    "ANA041": """\
# ANA041 sync-in-loop

## What it means

A host synchronisation (.item(), .cpu(), .numpy(), .tolist()) in the training loop. Severity: warning. Reported by `npu-migrate analyze`.

```python
for batch in loader:
    ...
    print(loss.item())          # ANA041 (every step)
    if step % 100 == 0:
        log(loss.item())        # ANA041 info: periodic
```

## Why

`.item()`, `.cpu()`, `.numpy()` and `.tolist()` wait until the NPU has finished every queued operator, so the host cannot run ahead. Inside the training loop this costs a pipeline stall per step. Under an `if step % N` guard it is reported as information (periodic logging is fine); on every step as a warning. A chain such as `x.detach().cpu().numpy()` is one finding.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The synchronising call, the training loop it is in (the loop around `.backward()`), and whether a periodic `if` guards it.

## What to do

No automatic fix: keep running sums on the device and read them every N steps.
""",

    "ANA042": """\
# ANA042 transfer-in-loop

## What it means

A blocking host-to-device copy in the training loop. Severity: info. Reported by `npu-migrate analyze`.

```python
x = x.to(device)                          # ANA042
# after:
x = x.to(device, non_blocking=True)       # with DataLoader(pin_memory=True)
```

## Why

A blocking host-to-device copy on every step (`.cuda()` or `.to(device)` without `non_blocking=True`) serialises data transfer and compute. With pinned memory and `non_blocking=True` the copy overlaps with the previous step. A tensor built on the host and then copied (`torch.tensor(...).to(device)`) should be created on the device instead.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The copy call and the training loop it is in.

## What to do

No automatic fix: `non_blocking=True` is only safe when the host does not modify the source before the copy completes.
""",

    "ANA043": """\
# ANA043 device-round-trip

## What it means

A device -> host -> device round trip in one expression. Severity: warning. Reported by `npu-migrate analyze`.

```python
y = torch.tensor(x.cpu().numpy()).cuda()   # ANA043
# after:
y = x.clone()
```

## Why

Moving a tensor to the host and straight back (`torch.tensor(x.cpu().numpy()).cuda()`, `x.cpu().to(device)`) costs two copies and a synchronisation for nothing. Reported anywhere in the code, not only in loops.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The expression that copies to the host (`.cpu()`, `.numpy()`, `.item()`, `.tolist()`) and back to the device.

## What to do

No automatic fix: check whether the host step did something (a NumPy call) that has a torch equivalent.
""",

    "ANA044": """\
# ANA044 graph-leak

## What it means

A tensor that keeps its autograd graph is accumulated across steps. Severity: warning. Reported by `npu-migrate analyze`.

```python
total += loss                 # ANA044
losses.append(loss)           # ANA044
# after:
total += loss.item()          # or loss.detach()
```

## Why

A loss or model output that still carries its autograd graph, accumulated across steps (`total += loss`, `losses.append(loss)`, `outputs.append(out)`), keeps every step's graph alive: device memory grows each step until it runs out. Losses are the receivers of `.backward()`; outputs are names assigned from calls of something named like a model.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The loss or model-output name, the `.backward()` or model call that makes it carry a graph, and the line that accumulates it.

## What to do

No automatic fix, but `.detach()` (or `.item()`) is the usual change.
""",

    "ANA045": """\
# ANA045 checkpointing-opportunity

## What it means

Repeated blocks trained without gradient checkpointing. Severity: info. Reported by `npu-migrate analyze`.

```python
self.blocks = nn.ModuleList([Block(d) for _ in range(depth)])   # ANA045
# in forward:
x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
```

## Why

A model that stacks repeated blocks (`nn.ModuleList([Block() for _ in range(n)])`, `nn.Sequential(*(Block() for _ in range(n)))`) and is trained without `torch.utils.checkpoint` stores every block's activations. The advice is given only when the blocks have parameters (never for a stack of `MaxPool2d` or activations), run as a chain (each on the previous block's output; not `[m(x) for m in self.m]` on one input, not `self.m[i](x[i])` one per pyramid level) and dominate the class's activations (estimated from literal layer widths; medium confidence when the depth or widths are not literal). Checkpointing each block keeps only its input and recomputes the rest in the backward pass, which often lets a model or batch fit in NPU memory.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The container of repeated blocks, the block class and its parameter-carrying layers, the `forward` line that chains the blocks (each block takes the previous one's output), and the activation estimate from literal layer widths.

## What to do

No automatic fix: checkpointing trades compute for memory.
""",

    "ANA046": """\
# ANA046 accumulation-opportunity

## What it means

The optimizer steps every iteration: no gradient accumulation. Severity: info. Reported by `npu-migrate analyze`.

```python
loss.backward()
optimizer.step()              # ANA046
# after:
(loss / N).backward()
if (i + 1) % N == 0:
    optimizer.step(); optimizer.zero_grad()
```

## Why

The optimizer steps on every iteration. If the CUDA batch size does not fit in NPU memory, gradient accumulation keeps the effective batch: scale the loss by 1/N and step every N iterations. Reported once per training loop; an optimizer step under an `if i % N` guard, under a test on an accumulation counter (`if ni - last_opt_step >= accumulate:`), under a flag computed from one (`need_update = (i + 1) % accum == 0`), or a training loop over accumulation micro-steps (`for micro_step in range(gradient_accumulation_steps)`) counts as accumulation in use, and no advice is given. Steps with arguments other than an optimizer (`step(closure)` of LBFGS, `step(context_id)` of distributed autograd) are not candidates.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The training loop, the optimizer step, and that no accumulation guard (`if (i + 1) % N == 0`, `if ni - last_opt_step >= accumulate`, an inner loop over accumulation micro-steps) surrounds it.

## What to do

No automatic fix: only needed when memory is short.
""",

    "ANA047": """\
# ANA047 allocator-advice

## What it means

A pattern that calls for a PYTORCH_NPU_ALLOC_CONF setting. Severity: info. Reported by `npu-migrate analyze`.

```python
for batch in loader:
    ...
    torch.cuda.empty_cache()   # ANA047
# after: drop the call and run with
# PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
```

## Why

Some patterns call for the NPU caching allocator's settings: `empty_cache()` inside the training loop (fragmentation fought by hand; `expandable_segments:True` does it better), or a `PYTORCH_CUDA_ALLOC_CONF` setting, which the NPU does not read: `PYTORCH_NPU_ALLOC_CONF` accepts a restricted key set and rejects CUDA-only keys such as `backend:cudaMallocAsync`; `expandable_segments:True` cannot be combined with `max_split_size_mb` or `garbage_collection_threshold`.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): The `empty_cache()` call in the training loop, or the `PYTORCH_CUDA_ALLOC_CONF` setting.

## What to do

No automatic fix for `empty_cache()`; the environment-variable rename itself is done by the NPU2xx rules.
""",

    "ANA048": """\
# ANA048 redundant-transfer

## What it means

A device copy that repeats one already made: `x.cuda().to(device)` in one expression, or
`model.to(device)` inside the training loop. Severity: warning. Reported by `npu-migrate analyze`.

```python
for x, y in loader:
    model.to(device)            # ANA048: once, before the loop
    x = x.cuda().to(device)     # ANA048: one copy is enough
```

## Why

A copy to the device of something already there is at best a no-op check and at worst a copy
and a synchronisation; a model moved every step walks all its parameters every step.

## Evidence

The finding lists what `analyze` saw, each with its line, and a confidence (high, medium, low): the expression with both copies, or the training loop and the model transfer inside it (medium confidence: the receiver is recognised by its name, `model`/`net`).

## What to do

Keep one copy; move the model once, before the loop.
""",
}
