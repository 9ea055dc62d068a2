"""`npu-migrate verify`: prove a migration right by running both sides (docs/verify.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command("verify", context_settings={"ignore_unknown_options": True})
@click.option("--original", default=None, type=click.Path(path_type=Path), help="Tree with the original (CUDA) code.")
@click.option("--migrated", default=None, type=click.Path(path_type=Path), help="Tree with the migrated (NPU) code.")
@click.option("--portable", default=None, type=click.Path(path_type=Path),
              help="Script mode, one device-generic tree (apply --target portable): run it on each of --devices.")
@click.option("--devices", default="cpu,npu", show_default=True,
              help="With --portable: the reference device first (cpu), then the devices to compare with it (npu, cuda).")
@click.option("--entry", default=None, help="Model mode: FILE.py:FUNCTION present in both trees (the build protocol).")
@click.option("--steps", default=None, type=int, help="Training steps (backward calls) to run [model mode: 1, script mode: 2].")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed set before the code runs (the code's own seeds win).")
@click.option("--share-state", is_flag=True,
              help="Model mode: load the reference's initial state_dict and batch into the migrated side, to isolate kernel differences.")
@click.option("--rename", "renames", multiple=True, metavar="OLD=NEW",
              help="Model mode: a parameter/module renamed by the migration (repeatable).")
@click.option("--rng", type=click.Choice(["align", "device"]), default="align", show_default=True,
              help="Script mode: 'device' gives the emulated npu its own random stream, as hardware has.")
@click.option("--device-precision", is_flag=True,
              help="Script mode, emulation: HF32 conv (and matmul when allowed) as torch_npu computes them.")
@click.option("--fp16-accumulation", is_flag=True,
              help="Script mode, with --device-precision: float16 matmuls accumulate in float16 (blocks of 16), "
                   "for kernels that do; the cube accumulates in float32.")
@click.option("--no-noise-run", is_flag=True,
              help="Script mode: skip the device-precision run of the original; judge by per-op-class tolerances.")
@click.option("--noise-factor", default=2.0, show_default=True, type=float,
              help="Script mode: an op diverges beyond this many times its measured device noise (plus a floor).")
@click.option("--dump", "dump_dir", default=None, type=click.Path(path_type=Path),
              help="Script mode: write msprobe dump.json/stack.json of both sides under this folder.")
@click.option("--compare-dumps", nargs=2, default=None, type=click.Path(path_type=Path), metavar="REF MIGRATED",
              help="Compare two msprobe dump.json files offline (e.g. one taken on an Ascend device).")
@click.option("--device-dump", default=None, type=click.Path(path_type=Path), metavar="DUMP",
              help="Script mode: an msprobe L1 dump.json taken on a device, aligned by API name with a reference "
                   "run of --original (lines located in --migrated when given).")
@click.option("--reference", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Device of the reference side (float32).")
@click.option("--backing", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where the emulation runs the migrated side when no NPU is present.")
@click.option("--max-peak", default=None, help="Peak-memory budget of the migrated side, e.g. 8GiB.")
@click.option("--max-peak-ratio", default=None, type=float, help="Budget as migrated/reference peak, e.g. 1.2.")
@click.option("--threshold", "threshold_items", multiple=True, metavar="KEY=VALUE",
              help="Override a pass-rule threshold (repeatable), e.g. cosine_min=0.999.")
@click.option("--thresholds", "thresholds_file", default=None, help="JSON file overriding thresholds.")
@click.option("--no-memory", is_flag=True, help="Skip the peak-memory measurement.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--max-rows", default=50, show_default=True, type=int, help="Rows of the tensor table (0: all).")
@click.option("--timeout", default=600.0, show_default=True, type=float, help="Seconds per side.")
@click.option("--reference-store", default=None, type=click.Path(path_type=Path),
              help="Script mode: keep the reference and noise runs here and reuse them while the original tree, "
                   "script, arguments and settings are unchanged [default: $NPU_MIGRATE_REFERENCE_STORE, else "
                   "~/.cache/npu-migrate/verify-references].")
@click.option("--no-reference-store", is_flag=True, help="Script mode: run the reference afresh and keep nothing.")
@click.argument("script", nargs=-1, type=click.UNPROCESSED)
def command(original, migrated, portable, devices, entry, steps, seed, share_state, renames, rng, device_precision, fp16_accumulation, no_noise_run,
            noise_factor, dump_dir, compare_dumps, device_dump, reference, backing, max_peak, max_peak_ratio,
            threshold_items, thresholds_file, no_memory, fmt, max_rows, timeout, reference_store, no_reference_store,
            script):
    """Run ORIGINAL on the reference and MIGRATED on the NPU (or its emulation) and compare.

    Script mode: `verify --original A --migrated B -- train.py ARGS...` runs the real script in both
    trees and reports the first divergence at the migrated tree's path.py:LINE. Model mode:
    `--entry FILE.py:FUNCTION` (the build protocol). Exit codes: 0 pass, 1 fail, 2 error.
    """
    try:
        import torch  # noqa: F401  (the verifier runs models: torch is needed here, not for apply)
    except ImportError:
        click.echo("npu-migrate verify: PyTorch is not installed (pip install torch)", err=True)
        sys.exit(2)
    if compare_dumps:
        from npu_migrate.verify.offline import compare_dump_files

        sys.exit(_emit(compare_dump_files(*compare_dumps, noise_factor=noise_factor), fmt))
    from npu_migrate.verify.sizes import parse_size

    try:
        budget = parse_size(max_peak) if max_peak is not None else None
    except ValueError as error:
        _usage_error(str(error))
    memory_settings = {"memory": not no_memory, "max_peak": budget, "max_peak_ratio": max_peak_ratio,
                       "reference_store": _store_path(reference_store, no_reference_store)}
    if portable is not None:
        if original is not None or migrated is not None or entry:
            _usage_error("--portable TREE replaces --original/--migrated (and runs a script, not --entry)")
        if not script:
            _usage_error("nothing to run: give a script after -- (e.g. -- train.py --epochs 1)")
        sys.exit(_portable(portable, devices, script, steps=steps or 2, seed=seed, rng=rng,
                           device_precision=device_precision, noise_run=not no_noise_run,
                           noise_factor=noise_factor, timeout=timeout, fmt=fmt, **memory_settings))
    if device_dump is not None:
        if original is None or not script:
            _usage_error("--device-dump needs --original TREE and the script after -- (the reference it is aligned with)")
        from npu_migrate.verify.offline import compare_device_dump
        from npu_migrate.verify.script import ScriptOptions

        options = ScriptOptions(original, migrated or original, script[0], list(script[1:]), steps=steps or 2,
                                seed=seed, reference=reference, noise_run=not no_noise_run, noise_factor=noise_factor,
                                timeout=timeout, memory=False, reference_store=memory_settings["reference_store"])
        sys.exit(_emit(compare_device_dump(options, device_dump), fmt, max_rows))
    if original is None or migrated is None:
        _usage_error("--original and --migrated are required (or --portable TREE, or --compare-dumps REF MIGRATED)")
    if entry and (reference_store is not None or no_reference_store):
        _usage_error("--reference-store/--no-reference-store apply to script mode (a script after --), not --entry")
    if script and entry:
        _usage_error("give either --entry (model mode) or a script after -- (script mode), not both")
    if not script and not entry:
        _usage_error("nothing to run: give a script after -- (e.g. -- train.py --epochs 1) or --entry FILE.py:FUNCTION")
    if fp16_accumulation and not (script and device_precision):
        _usage_error("--fp16-accumulation applies to script mode with --device-precision")
    if script:
        from npu_migrate.verify.script import ScriptOptions, verify_script

        options = ScriptOptions(original, migrated, script[0], list(script[1:]), steps=steps or 2, seed=seed,
                                reference=reference, backing=backing, rng=rng, device_precision=device_precision,
                                fp16_accumulation=fp16_accumulation, noise_run=not no_noise_run, noise_factor=noise_factor, timeout=timeout,
                                dump=dump_dir, **memory_settings)
        sys.exit(_emit(verify_script(options), fmt, max_rows))
    from npu_migrate.verify import VerifyOptions, verify
    from npu_migrate.verify.thresholds import (
        ThresholdPolicy,
        parse_overrides,
        parse_renames,
    )

    try:
        policy = ThresholdPolicy.load(parse_overrides(threshold_items), thresholds_file)
        rename_map = parse_renames(renames)
    except ValueError as error:
        click.echo(f"npu-migrate verify: {error}", err=True)
        sys.exit(2)
    options = VerifyOptions(original, migrated, entry, steps=steps or 1, seed=seed, reference=reference,
                            backing=backing, memory=not no_memory, max_peak=budget,
                            max_peak_ratio=max_peak_ratio, thresholds=policy, timeout=timeout,
                            share_state=share_state, renames=rename_map)
    outcome = verify(options)
    if fmt == "json":
        click.echo(json.dumps(outcome.to_dict(), indent=2, default=str))
    elif fmt == "markdown":
        click.echo(outcome.report(max_rows).to_markdown())
    else:
        if outcome.verdict == "error":
            click.echo(f"npu-migrate verify: {outcome.reason}", err=True)
        else:
            from rich.console import Console

            outcome.report(max_rows).render(Console(width=160))
    sys.exit(outcome.exit_code)


def _portable(tree: Path, devices: str, script: tuple[str, ...], fmt: str, **settings) -> int:
    """One portable tree on the reference device and on each other device; the worst exit code."""
    from npu_migrate.verify.script import ScriptOptions, verify_script

    names = [name.strip() for name in devices.split(",") if name.strip()]
    if len(names) < 2 or names[0] != "cpu" or any(name not in ("npu", "cuda") for name in names[1:]):
        _usage_error(f"--devices {devices}: the reference 'cpu' first, then one or more of npu, cuda (e.g. cpu,npu)")
    cache: dict = {}
    outcomes = {}
    for device in names[1:]:
        options = ScriptOptions(tree, tree, script[0], list(script[1:]), portable=True, target_device=device,
                                **settings)
        outcomes[device] = verify_script(options, cache)
    if fmt == "json":
        click.echo(json.dumps({device: outcome.to_dict() for device, outcome in outcomes.items()}, indent=2,
                              default=str))
        return max(outcome.exit_code for outcome in outcomes.values())
    for device, outcome in outcomes.items():
        if fmt != "json" and len(outcomes) > 1:
            click.echo(f"== cpu vs {device} ==")
        _emit(outcome, fmt)
    return max(outcome.exit_code for outcome in outcomes.values())


def _usage_error(message: str) -> None:
    click.echo(f"npu-migrate verify: {message}", err=True)
    sys.exit(2)


def _store_path(chosen: Path | None, off: bool) -> Path | None:
    """Where script mode keeps its reference runs: --reference-store, else the default; None when off."""
    if off:
        return None
    from npu_migrate.verify.store import default_root

    return chosen or default_root()


def _emit(outcome, fmt: str, max_rows: int = 50) -> int:
    """Print a script-mode or offline outcome; returns its exit code."""
    if fmt == "json":
        click.echo(json.dumps(outcome.to_dict(), indent=2, default=str))
    elif outcome.verdict == "error":
        click.echo(f"npu-migrate verify: {outcome.reason}", err=True)
    elif fmt == "markdown":
        click.echo(outcome.report(max_rows).to_markdown())
    else:
        from rich.console import Console

        outcome.report(max_rows).render(Console(width=160))
    return outcome.exit_code
