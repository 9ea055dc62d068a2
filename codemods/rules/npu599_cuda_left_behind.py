"""NPU599: the final sweep (cuda-left-behind)."""

from __future__ import annotations

import ast
import bisect
import warnings
from typing import ClassVar

from codemods.analyses.cudasites import cuda_sites, statement_spans
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.api.suppression import ALL
from codemods.model.facts import FileFacts
from codemods.model.linemap import line_map
from npu_migrate.core.diagnostics import BUILTIN_PREFIXES, Diagnostic, Severity

# Files that can hold a site spell one of these (a plain alternation: `(?i)` or a long list of
# library names makes this search the slowest of all prefilters). A file that imports a CUDA-only
# library and says nothing else about CUDA is reported by NPU301-NPU314, not swept.
PREFILTER = r"cuda|CUDA|Cuda|cudnn|CUDNN|nccl|NCCL|CUBLAS|Tensorrt|gpus(?:_per_node|_per_task)?\s*=|accelerator\s*="


_ROUTES = {
    "api": "use its torch.npu / torch_npu counterpart, or keep it on a CUDA-only branch",
    "method": "use `.npu()` / `.to(device)` / `.is_npu`",
    "string": "if it names a device, backend or variable, write the NPU one "
              "(\"npu\", \"hccl\", ASCEND_*/HCCL_*, CANNExecutionProvider)",
    "library": "CUDA-only: keep it on a CUDA-only branch or replace it (`npu-migrate rules` lists the "
               "third-party routes, NPU301-NPU315)",
    "keyword": "select the NPU (\"npu\") the way the framework documents it",
    "scheduler": "it asks the job scheduler for GPUs (SLURM `--gpus-per-node`, GRES `gpu`), which an Ascend node "
                 "does not offer: request its NPUs the way the cluster declares them (where gres.conf declares "
                 "`npu`: submitit's `slurm_gres=\"npu:N\"`, `#SBATCH --gres=npu:N`)",
}


class CudaLeftBehind(Rule):
    """## What it does

    After every other rule ran, CUDA-specific code still in the migrated file that no diagnostic speaks about is reported.

    ## Why

    A migration that is quiet where it fails cannot be trusted. The engine hands the migrated text to this rule once (an `ast` scan): `torch.cuda` names, `.cuda()` calls, `.is_cuda`, device/backend strings, CUDA environment variables, ONNX Runtime CUDA providers, `torch.cuda.*` mock targets, imports of CUDA-only libraries and framework switches are reported unless another rule reported on the same statement, the line carries an `npu-migrate: ignore` comment (or a `# noqa:` naming one of our codes), or a rule the run switched off (`--ignore`, the configuration's `ignore` or `per-file-ignores`) would have handled the line: switching a rule off is a decision the sweep does not overrule. Comments, docstrings, log/help text and paths are never sites, nor is `import torch.backends.cudnn` (harmless on NPU; the flags it sets are NPU161). Lines point at the original file.

    ## Example

    ```python
    backend = "nccl"   # no rule proves this is a backend: NPU599
    ```

    ## Fix safety

    No fix: it reports what nothing else handled.
    Suppress with `# npu-migrate: ignore[NPU599]`.

    ## Targets

    - **npu**: reports it with the route (no fix)
    - **portable**: not yet
    """

    code = "NPU599"
    name = "cuda-left-behind"
    summary = "Final sweep: CUDA-specific code still in the migrated file that no rule rewrote or reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = PREFILTER
    # the engine runs this rule once per file, after all others, on the migrated text
    final_sweep: ClassVar[bool] = True

    def sweep(self, new_text: str, new_tree: ast.Module | None = None) -> None:
        """Append an NPU599 diagnostic for every site of `new_text` nothing else covers
        (`new_tree`: its tree, when the engine has parsed it already)."""
        context = self.context
        tree = context.facts.tree if new_text == context.source else (new_tree or _parse(new_text))
        if tree is None:
            return  # the engine reports a rewrite that does not parse
        facts = context.facts if tree is context.facts.tree else FileFacts.from_tree(tree)
        sites = cuda_sites(tree, facts, new_text)
        if not sites:
            return
        to_old = line_map(context.source, new_text)
        covered: set[int] | None = None
        reported = {d.line for d in context.diagnostics if d.code != self.code}
        # a line where the user silenced some rule (`# npu-migrate: ignore[CODE]`, or `# noqa:
        # CODE` with a code of ours) keeps its CUDA code on purpose: the sweep does not re-open that
        # decision (other linters' `noqa` codes do not count: an import silenced for F401 is swept)
        suppressions = context.suppressions
        reported |= {line for line, _, _ in suppressions.written}
        reported |= {line for line, codes in suppressions.by_line.items()
                     if codes == ALL or any(code.startswith(BUILTIN_PREFIXES) for code in codes)}
        for site in sites:
            line = to_old(site.line)
            if line in reported:
                continue
            if covered is None:  # statements are mapped only when some site needs it
                covered = self._covered_lines(context.facts.tree)
            if line in covered:
                continue
            context.diagnostics.append(Diagnostic(
                self.code, f"`{site.construct}` is still CUDA-specific and no rule handled it: {_ROUTES[site.kind]}",
                context.path, line, site.col, self.severity))

    def _covered_lines(self, tree: ast.Module) -> set[int]:
        """Original lines on which another rule has reported: a diagnostic covers its whole
        statement (a multi-line call, an `if` header)."""
        reported = sorted({d.line for d in self.context.diagnostics if d.code != self.code})
        covered = set(reported)
        if not reported:
            return covered
        for first, last in statement_spans(tree):
            at = bisect.bisect_left(reported, first)
            if at < len(reported) and reported[at] <= last:
                covered.update(range(first, last + 1))
        return covered


def _parse(text: str) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


CASES = [
    Invalid(
        """\
backend = "nccl"
""",
        codes=("NPU599",),
    ),
    Invalid(  # ConvNeXt's run_with_submitit.py: the SLURM job asks for GPUs
        """\
import submitit
executor = submitit.AutoExecutor(folder=job_dir)
executor.update_parameters(mem_gb=40 * n, gpus_per_node=n, tasks_per_node=n)
""",
        codes=("NPU599",),
    ),
    Valid(
        """\
print("running on cuda")
executor.update_parameters(gpus_per_node=0, slurm_gres="npu:8")
""",
    ),
    Valid(
        """\
print('running on cuda')
""",
    ),
    Valid(
        """\
print('cuda')
""",
    ),
    Valid(
        """\
import logging
logging.info('cuda:%d', 0)
""",
    ),
    Valid(
        """\
# torch.cuda.synchronize() in a comment
x = 1
""",
    ),
    Valid(
        'def f():\n    """Moves the model to cuda (torch.cuda.synchronize)."""\n',
    ),
    Valid(
        """\
path = 'checkpoints/cuda_model.pt'
""",
    ),
    Valid(
        """\
import argparse
p = argparse.ArgumentParser()
p.add_argument('--no-cuda', action='store_true', help='cuda')
""",
    ),
    Valid(
        """\
if args.cuda:
    pass
""",
    ),
    Valid(
        """\
use_cuda = False
""",
    ),
    Valid(
        """\
cfg.trainer.accelerator = 'auto'
""",
    ),
    Valid(
        """\
x = 'Using CUDA_VISIBLE_DEVICES from the environment'
""",
    ),
    Valid(
        """\
import torch.backends.cudnn as cudnn
""",
    ),
    Valid(
        """\
import torch.backends.cudnn
""",
    ),
    Valid(
        """\
from torch.backends import cudnn
""",
    ),
]
