"""NPU257: the shell-nvidia-smi rule."""

from __future__ import annotations

from codemods.api.cases import Invalid
from codemods.api.rule import Fix
from codemods.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellNvidiaSmi(ShellRule):
    r"""## What it does

    Launch scripts: `nvidia-smi` is reported (diagnostic only).

    ## Why

    The launch-script twin of NPU207: see `docs/rules/NPU207.md` for what the mapping is and why.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU257]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    NGPUS=$(nvidia-smi -L | wc -l)   # NPU257
    ```

    ## Fix safety

    No fix: diagnostic only.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU257"
    supported_targets = frozenset({"npu", "portable"})
    name = "shell-nvidia-smi"
    summary = "Launch scripts: `nvidia-smi` is reported (Ascend hosts have `npu-smi`)"
    fix = Fix.NONE
    severity = Severity.WARNING
    kinds = frozenset({"nvidia_smi"})
    prefilter = r"nvidia-smi"


CASES = [
    Invalid(
        """\
NGPUS=$(nvidia-smi -L | wc -l)
""",
        path='launch.sh',
    ),
]
