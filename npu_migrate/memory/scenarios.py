"""Generated snapshots of deep models with a known story, for the leak benchmark and tests.

Each scenario runs a simulated caching allocator (synthetic.SimulatedAllocator) through a
deep model: a single forward/backward pass, a training loop whose only step evidence is the
optimizer's frames or ProfilerStep annotations, or an inference loop without any step
evidence; with or without a planted leak at a known user line, optionally behind the
emulation layer's `__torch_function__` frame. `facts` says what a correct analysis finds.
"""

from __future__ import annotations

from typing import Any

from npu_migrate.memory.synthetic import STREAM, SimulatedAllocator, truncate

TORCH = "/usr/lib/python3.11/site-packages/torch"
MODEL = "/home/user/project/model.py"
TRAIN = "/home/user/project/train.py"
EMULATION = "/work/main/npu_migrate/emulation/_devices.py"
MiB = 1 << 20


def _frames(*sites: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [{"name": n, "filename": f, "line": ln} for n, f, ln in sites]


def _stack(user: tuple[str, str, int], *torch_frames: tuple[str, str, int],
           emulation: bool = False) -> list[dict[str, Any]]:
    """Innermost first: torch frames, the emulation layer (optional), then the user line and
    the training loop around it."""
    frames = list(torch_frames)
    if emulation:
        frames.append(("__torch_function__", EMULATION, 58))
    frames += [user, ("main", TRAIN, 90)]
    return _frames(*frames)


LINEAR = ("linear", f"{TORCH}/nn/functional.py", 100)
CALL = ("_call_impl", f"{TORCH}/nn/modules/module.py", 1750)
BACKWARD = ("_engine_run_backward", f"{TORCH}/autograd/graph.py", 823)
ADAM_STEP = [("_multi_tensor_adam", f"{TORCH}/optim/adam.py", 703),
             ("step", f"{TORCH}/optim/adam.py", 234),
             ("wrapper", f"{TORCH}/optim/optimizer.py", 487)]
ADAM_INIT = [("_init_group", f"{TORCH}/optim/adam.py", 174),
             ("step", f"{TORCH}/optim/adam.py", 234)]
ZERO_GRAD = [("zero_grad", f"{TORCH}/optim/optimizer.py", 955)]
LEAK_LINE = ("train_step", TRAIN, 48)  # e.g. losses.append(loss) without .item()
OUTPUT_LINE = ("generate", TRAIN, 71)  # e.g. outputs.append(model(x)) in an inference loop


def site(frame: tuple[str, str, int]) -> str:
    name, filename, line = frame
    return f"{filename.rsplit('/', 1)[-1]}:{line} ({name})"


def deep_model(layers: int = 32, steps: int = 1, *, backward: bool = True,
               optimizer: bool = True, leak_bytes: int = 0, profiler: bool = False,
               with_time: bool = True, emulation: bool = False, hidden: int = 1024,
               seq: int = 512, grad_mode: bool = True) -> dict[str, Any]:
    """A snapshot of `steps` iterations of a `layers`-deep model.

    grad_mode=False is an inference loop under no_grad: each layer's input dies once the
    next layer ran, so only the planted leak (if any) survives an iteration."""
    events: list[dict] = []
    clock = [1_760_000_000_000_000]
    alloc = SimulatedAllocator(events, clock, with_time)
    act_bytes, weight_bytes = seq * hidden * 4, hidden * hidden * 4
    param_stack = _stack(("__init__", MODEL, 20), ("_apply", f"{TORCH}/nn/modules/module.py", 900))
    params = [alloc.alloc(weight_bytes, param_stack) for _ in range(layers)]
    annotations: list[dict] = []
    grads: list[int] = []
    state: list[int] = []
    leak_stack = _stack(LEAK_LINE if grad_mode else OUTPUT_LINE,
                        ("clone", f"{TORCH}/_tensor.py", 1400), emulation=emulation)
    for step in range(steps):
        if profiler and with_time:
            annotations.append({"name": f"ProfilerStep#{step}", "stage": "START", "device": 0,
                                "time_us": clock[0] + 1})
        batch = alloc.alloc(act_bytes, _stack(("load_batch", TRAIN, 30)))
        kept, previous = [], batch
        for k in range(layers):
            user = layer_line(k)
            out = alloc.alloc(act_bytes, _stack(user, LINEAR, CALL, emulation=emulation))
            tmp = alloc.alloc(2 * act_bytes, _stack(user, ("gelu", f"{TORCH}/nn/functional.py",
                                                           200), CALL))
            alloc.free_block(tmp, _stack(user, CALL))
            if grad_mode:
                kept.append(out)  # saved for backward
            else:
                alloc.free_block(previous, _stack(user, CALL))
            previous = out
        loss = alloc.alloc(4096, _stack(("train_step", TRAIN, 43), ("cross_entropy",
                                        f"{TORCH}/nn/functional.py", 3000)))
        if leak_bytes:
            alloc.alloc(leak_bytes, leak_stack)
        if grad_mode and backward:
            back = _stack(("train_step", TRAIN, 44), BACKWARD)
            for k in reversed(range(layers)):
                grads.append(alloc.alloc(weight_bytes, back))
                tmp = alloc.alloc(act_bytes, back)
                alloc.free_block(kept[k], back)
                alloc.free_block(tmp, back)
            kept = []
        if grad_mode and optimizer and backward:
            if not state:
                init = _stack(("train_step", TRAIN, 46), *ADAM_INIT)
                state = [alloc.alloc(weight_bytes, init) for _ in range(2 * layers)]
            run = _stack(("train_step", TRAIN, 46), *ADAM_STEP)
            for _ in range(max(layers // 8, 1)):
                tmp = alloc.alloc(weight_bytes, run)
                alloc.free_block(tmp, run)
            if step < steps - 1:  # zero_grad(set_to_none=True) frees them for the next step
                zero = _stack(("train_step", TRAIN, 47), *ZERO_GRAD)
                for g in grads:
                    alloc.free_block(g, zero)
                grads = []
        alloc.free_block(loss, _stack(("train_step", TRAIN, 49)))
        if grad_mode:
            alloc.free_block(batch, _stack(("train_step", TRAIN, 49)))
        else:
            alloc.free_block(previous, _stack(("generate", TRAIN, 72)))
        if profiler and with_time:
            annotations.append({"name": f"ProfilerStep#{step}", "stage": "END", "device": 0,
                                "time_us": clock[0]})
    del params
    snapshot: dict[str, Any] = {"segments": alloc.segments_dump(), "device_traces": [events]}
    if with_time:
        snapshot["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                          "expandable_segments": False}
        snapshot["external_annotations"] = annotations
    snapshot["_facts"] = {
        "leak_site": site(LEAK_LINE if grad_mode else OUTPUT_LINE) if leak_bytes else None,
        "leak_bytes": leak_bytes * steps, "steps": steps, "single_pass": steps == 1,
        "layers": layers}
    return snapshot


def layer_line(k: int) -> tuple[str, str, int]:
    """Layer k's forward runs one of three lines, as blocks of a real model do."""
    return ("forward", MODEL, 40 + k % 3)


def cases() -> list[tuple[str, dict[str, Any]]]:
    """The generated half of the leak benchmark: (name, snapshot) pairs, leak and no leak,
    with step evidence and without."""
    out = []
    for layers in (32, 48):
        out += [
            (f"single fwd+bwd+step, {layers} layers", deep_model(layers, 1)),
            (f"single fwd+bwd, {layers} layers, no optimizer",
             deep_model(layers, 1, optimizer=False)),
            (f"single forward (kept for backward), {layers} layers",
             deep_model(layers, 1, backward=False, optimizer=False)),
            (f"single fwd+bwd, {layers} layers, torch_npu (no time)",
             deep_model(layers, 1, with_time=False)),
        ]
    leak = 24 * MiB
    for label, kwargs in (("optimizer frames", {}), ("ProfilerStep", {"profiler": True}),
                          ("optimizer frames, emulation layer", {"emulation": True}),
                          ("optimizer frames, torch_npu", {"with_time": False})):
        out.append((f"training 12 steps, {label}, leak", deep_model(
            16, 12, leak_bytes=leak, **kwargs)))
        out.append((f"training 12 steps, {label}, no leak", deep_model(16, 12, **kwargs)))
    out.append(("inference loop 200 iterations (no steps), 4.4 GiB leak", deep_model(
        8, 200, grad_mode=False, leak_bytes=22 * MiB + 512 * 1024, hidden=512, seq=256)))
    out.append(("inference loop 200 iterations (no steps), no leak", deep_model(
        8, 200, grad_mode=False, hidden=512, seq=256)))
    out.append(("inference loop (no steps), emulation layer, leak", deep_model(
        8, 120, grad_mode=False, leak_bytes=4 * MiB, emulation=True, hidden=512, seq=256)))
    return out


def random_cases(count: int = 40, seed: int = 16) -> list[tuple[str, dict[str, Any]]]:
    """A seeded family of runs with varied depth, length, widths, leak sizes and evidence:
    half leak, half do not; a third are single passes (which never leak)."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = rng.choice(["single", "training", "inference"])
        kwargs: dict[str, Any] = {
            "layers": rng.choice([8, 16, 24, 32, 48, 64]),
            "hidden": rng.choice([256, 512, 1024]), "seq": rng.choice([128, 256, 512]),
            "with_time": rng.random() < 0.7, "emulation": rng.random() < 0.3}
        leak = rng.choice([0, 64 * 1024, MiB, 8 * MiB]) if kind != "single" else 0
        if kind == "single":
            kwargs.update(steps=1, backward=rng.random() < 0.8,
                          optimizer=rng.random() < 0.5)
        elif kind == "training":
            kwargs.update(steps=rng.randint(4, 16), profiler=rng.random() < 0.4)
        else:
            kwargs.update(steps=rng.randint(20, 80), grad_mode=False,
                          layers=rng.choice([4, 8, 12]))
        label = (f"random {i}: {kind}, {kwargs['layers']} layers, {kwargs['steps']} steps, "
                 f"leak {leak // 1024} KiB")
        out.append((label, deep_model(leak_bytes=leak, **kwargs)))
    return out


def starts_with_frees(blocks: int = 64, block_bytes: int = 8 * MiB) -> tuple[dict[str, Any], int]:
    """Activations of 512 MiB allocated, then the ring buffer keeps only what follows: their
    frees and 1 MiB of churn. The true peak (512 MiB) lies before the first recorded event.
    Returns the truncated snapshot and that peak."""
    events: list[dict] = []
    alloc = SimulatedAllocator(events, [1_760_000_000_000_000], True)
    act = _stack(("forward", MODEL, 40), LINEAR, CALL)
    held = [alloc.alloc(block_bytes, act) for _ in range(blocks)]
    before = len(events)
    back = _stack(("train_step", TRAIN, 44), BACKWARD)
    for addr in held:
        alloc.free_block(addr, back)
    for _ in range(50):
        tmp = alloc.alloc(MiB, _stack(("train_step", TRAIN, 45)))
        alloc.free_block(tmp, _stack(("train_step", TRAIN, 45)))
    full = {"segments": alloc.segments_dump(), "device_traces": [events],
            "allocator_settings": {"expandable_segments": False}}
    cut = truncate(full, len(events) - before)
    cut["_facts"] = {"true_peak": blocks * block_bytes, "leak_site": None}
    return cut, blocks * block_bytes


LOGITS_LINE = ("train_step", TRAIN, 42)  # logits = model(x)
MASK_LINE = ("forward", MODEL, 30)  # mask = causal_mask(x), read by every layer


def idle_run(layers: int = 16, steps: int = 6, *, stale_logits: bool = False,
             mask: bool = False, prefetch: bool = False, optimizer_temps: bool = False,
             with_time: bool = True, seq: int = 512, hidden: int = 1024) -> dict[str, Any]:
    """A training loop whose blocks have the shapes MEM005 must tell apart: logits kept until
    the next step's logits replace them (idle: the stale reference), and blocks that look long
    lived but are in use: an attention mask every layer reads, the next batch prefetched one
    step ahead, activations kept for the backward, per-parameter optimizer temporaries."""
    events: list[dict] = []
    clock = [1_760_000_000_000_000]
    alloc = SimulatedAllocator(events, clock, with_time)
    act_bytes, weight_bytes = seq * hidden * 4, hidden * hidden * 4
    param_stack = _stack(("__init__", MODEL, 20), ("_apply", f"{TORCH}/nn/modules/module.py", 900))
    for _ in range(layers):
        alloc.alloc(weight_bytes, param_stack)
    logits_stack = _stack(LOGITS_LINE, LINEAR, CALL)
    batch_stack = _stack(("load_batch", TRAIN, 30), ("to", f"{TORCH}/_tensor.py", 1100))
    logits = None
    batch = alloc.alloc(act_bytes, batch_stack)
    grads: list[int] = []
    for _ in range(steps):
        upcoming = alloc.alloc(act_bytes, batch_stack) if prefetch else None
        masked = alloc.alloc(seq * seq * 4, _stack(MASK_LINE, CALL)) if mask else None
        kept = []
        for k in range(layers):
            user = layer_line(k)
            kept.append(alloc.alloc(act_bytes, _stack(user, LINEAR, CALL)))
            tmp = alloc.alloc(2 * act_bytes, _stack(user, ("softmax", f"{TORCH}/nn/functional.py",
                                                           2137), CALL))
            alloc.free_block(tmp, _stack(user, CALL))
        new_logits = alloc.alloc(8 * act_bytes, logits_stack)
        if logits is not None and stale_logits:
            alloc.free_block(logits, _stack(LOGITS_LINE))  # freed when `logits` is rebound
        logits = new_logits
        back = _stack(("train_step", TRAIN, 44), BACKWARD)
        for k in reversed(range(layers)):
            if len(grads) < layers:
                grads.append(alloc.alloc(weight_bytes, back))
            tmp = alloc.alloc(act_bytes, back)
            alloc.free_block(kept[k], back)
            alloc.free_block(tmp, back)
        if masked is not None:
            alloc.free_block(masked, back)
        run = _stack(("train_step", TRAIN, 46), *ADAM_STEP)
        previous = alloc.alloc(weight_bytes, run)
        for _ in range(layers - 1 if optimizer_temps else 0):
            tmp = alloc.alloc(weight_bytes, run)
            alloc.free_block(previous, run)  # the previous parameter's temporary dies after
            previous = tmp
        alloc.free_block(previous, run)
        if not stale_logits:
            alloc.free_block(logits, _stack(("train_step", TRAIN, 48)))  # del logits
            logits = None
        if prefetch and upcoming is not None:
            alloc.free_block(batch, _stack(("train_step", TRAIN, 49)))
            batch = upcoming
    snapshot: dict[str, Any] = {"segments": alloc.segments_dump(), "device_traces": [events]}
    if with_time:
        snapshot["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "",
                                          "expandable_segments": False}
    snapshot["_facts"] = {"idle_site": site(LOGITS_LINE) if stale_logits else None,
                          "leak_site": None, "single_pass": False}
    return snapshot


def idle_cases() -> list[tuple[str, dict[str, Any]]]:
    """(name, snapshot) for the inefficient-block review: which MEM005 must find, which not."""
    return [
        ("stale logits held into the next step", idle_run(stale_logits=True)),
        ("stale logits, torch_npu shape (no time)", idle_run(stale_logits=True,
                                                             with_time=False)),
        ("stale logits next to a mask every layer reads", idle_run(stale_logits=True,
                                                                   mask=True)),
        ("stale logits larger than all activations (4 layers)", idle_run(
            layers=4, steps=3, stale_logits=True)),
        ("attention mask every layer reads", idle_run(mask=True)),
        ("next batch prefetched one step ahead", idle_run(prefetch=True)),
        ("per-parameter optimizer temporaries", idle_run(optimizer_temps=True)),
        ("activations kept for the backward", idle_run()),
        ("inference loop x = layer(x), activations dominate", deep_model(
            8, 60, grad_mode=False, hidden=2048, seq=1024)),
    ]


__all__ = ["STREAM", "cases", "deep_model", "idle_cases", "site", "starts_with_frees"]
