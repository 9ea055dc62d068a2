"""NPU254: the shell-alloc-conf rule."""

from __future__ import annotations

from codemods.analyses import envmap
from codemods.api.cases import Invalid
from codemods.families.shell import ShellRule
from npu_migrate.core.diagnostics import Severity


class ShellAllocConf(ShellRule):
    r"""## What it does

    Launch scripts: `PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; keys torch_npu refuses are errors.

    ## Why

    The launch-script twin of NPU204: see `docs/rules/NPU204.md` for what the mapping is and why.

    The scan is line-based and conservative: it rewrites `NAME=value` words (also after `export`, `env`, `docker run -e`, `mpirun -x`), `export`/`unset NAME`, and `$NAME` / `${NAME...}` expansions outside single quotes; it never touches comments, text in single quotes, or the arguments of `echo`/`printf`. Line continuations with `\` and here-documents are followed. An edit on a line carrying `# npu-migrate: ignore[NPU254]` is skipped, and the engine drops suppressed diagnostics, exactly as for Python files.

    ## Example

    ```bash
    # before
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128   # error
    # after
    export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
    export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128   # error: keep one
    ```

    ## Fix safety

    Safe: refused keys are reported, never deleted silently.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU254"
    name = "shell-alloc-conf"
    summary = "Launch scripts: `PYTORCH_CUDA_ALLOC_CONF` becomes `PYTORCH_NPU_ALLOC_CONF`; refused keys are errors"
    severity = Severity.ERROR
    kinds = frozenset({"alloc_conf"})
    prefilter = envmap.names_pattern(kinds)


CASES = [
    Invalid(
        """\
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128   # error
""",
        after="""\
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128   # error
""",
        path='launch.sh',
    ),
    Invalid(
        """\
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
""",
        after="""\
export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True
""",
        path='run.sh',
    ),
    Invalid(
        """\
export PYTORCH_CUDA_ALLOC_CONF="release_lock_on_cudamalloc:True"
""",
        after="""\
export PYTORCH_NPU_ALLOC_CONF="release_lock_on_npumalloc:True"
""",
        lines=(1,),
        path='run.sh',
    ),
]
