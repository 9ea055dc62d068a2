"""`npu-migrate verify`: prove a migration right by running both sides (docs/verify.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command("verify")
@click.option("--original", required=True, type=click.Path(path_type=Path), help="Tree with the original (CUDA) code.")
@click.option("--migrated", required=True, type=click.Path(path_type=Path), help="Tree with the migrated (NPU) code.")
@click.option("--entry", required=True, help="FILE.py:FUNCTION present in both trees (the build protocol).")
@click.option("--steps", default=1, show_default=True, type=int, help="Optimizer steps to run.")
@click.option("--seed", default=0, show_default=True, type=int)
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
def command(original, migrated, entry, steps, seed, reference, backing, max_peak, max_peak_ratio,
            threshold_items, thresholds_file, no_memory, fmt, max_rows, timeout):
    """Run ORIGINAL on the reference and MIGRATED on the NPU (or its emulation); compare outputs,
    loss, gradients, parameters, per-module activations and peak memory.

    Exit codes: 0 pass, 1 fail, 2 error.
    """
    try:
        import torch  # noqa: F401  (the verifier runs models: torch is needed here, not for apply)
    except ImportError:
        click.echo("npu-migrate verify: PyTorch is not installed (pip install torch)", err=True)
        sys.exit(2)
    from npu_migrate.verify import VerifyOptions, verify
    from npu_migrate.verify.sizes import parse_size
    from npu_migrate.verify.thresholds import ThresholdPolicy, parse_overrides

    try:
        policy = ThresholdPolicy.load(parse_overrides(threshold_items), thresholds_file)
        budget = parse_size(max_peak) if max_peak is not None else None
    except ValueError as error:
        click.echo(f"npu-migrate verify: {error}", err=True)
        sys.exit(2)
    options = VerifyOptions(original, migrated, entry, steps=steps, seed=seed, reference=reference,
                            backing=backing, memory=not no_memory, max_peak=budget,
                            max_peak_ratio=max_peak_ratio, thresholds=policy, timeout=timeout)
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
