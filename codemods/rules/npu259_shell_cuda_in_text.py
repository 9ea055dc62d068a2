"""NPU259: the shell-cuda-in-text rule."""

from __future__ import annotations

import re

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix
from codemods.families.shell import ShellRule
from codemods.model.shellwords import LineIndex, lex
from npu_migrate.core.diagnostics import Severity

# `python -c CODE`, `python3.11 -c CODE` (the code may sit in the same quoted word, as under ssh)
_PYTHON_C = re.compile(r"\bpython[\d.]*\s+-c\b")
_PYTHON = re.compile(r"^(?:.*/)?python[\d.]*$")
# what makes a Python snippet CUDA-specific
_CUDA_IN_PYTHON = re.compile(r"\.cuda\(|\btorch\.cuda\b|\bdevice\s*=\s*['\"]cuda|\bto\(\s*['\"]cuda")
_NVIDIA_DEVICE_FILE = re.compile(r"/dev/nvidia[\w*\[\]-]*")


def _python_code_words(literals: list[str | None]) -> set[int]:
    """Indexes of the words a `python -c` of this command runs as code."""
    return {i + 1 for i, lit in enumerate(literals[:-1])
            if lit == "-c" and any(p is not None and _PYTHON.match(p) for p in literals[:i])}


class ShellCudaInText(ShellRule):
    r"""## What it does

    Launch scripts: Python code run from the shell (`python -c '...'`, also inside an `ssh host "..."` command) that uses CUDA, and NVIDIA's device files (`/dev/nvidia*`), are reported

    ## Why

    A launch script often checks its hosts before training: `ssh $host "python -c 'import torch; print(torch.randn(100).cuda())'"` fails on every Ascend host (no CUDA in torch_npu's build, and `torch_npu` is never imported there), and `lsof /dev/nvidia*` finds nothing, since Ascend's device files are `/dev/davinci*` (with `/dev/davinci_manager`, `/dev/devmm_svm`, `/dev/hisi_hdc`). The code sits inside shell strings that npu-migrate does not rewrite (quoting rules differ by shell and by remote command), so the line is reported with what to write. The scan is the shell rules' own word reader: never comments or `echo`/`printf` text.

    ## Example

    ```bash
    # before
    ssh $host "python -c 'import torch; print(torch.randn(100).cuda())'"   # NPU259
    COMMAND="lsof /dev/nvidia* | awk '{print \$2}' | xargs -I {} kill {}"   # NPU259
    ```

    ## Fix safety

    No fix: diagnostic only. Suppress with `# npu-migrate: ignore[NPU259]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report
    """

    code = "NPU259"
    supported_targets = frozenset({"npu", "portable"})
    name = "shell-cuda-in-text"
    summary = "Launch scripts: CUDA in Python code run from the shell (`python -c`) and NVIDIA device files (`/dev/nvidia*`) are reported"
    fix = Fix.NONE
    severity = Severity.WARNING
    prefilter = r"/dev/nvidia|-c\b"

    def rewrite_text(self, text: str) -> str:
        index = LineIndex(text)
        for words in lex(text):
            literals = [w.literal(text) for w in words]
            if literals and literals[0] in ("echo", "printf"):
                continue
            code_words = _python_code_words(literals)
            for i, word in enumerate(words):
                raw = text[word.start:word.end]
                if i in code_words or _PYTHON_C.search(raw):
                    self._python(raw, word.start, index)
                for found in _NVIDIA_DEVICE_FILE.finditer(raw):
                    line, col = index.position(word.start + found.start())
                    self.report_at(line, col, f"`{found.group(0)}` is an NVIDIA device file: Ascend hosts have "
                                              "`/dev/davinci*` (and `/dev/davinci_manager`, `/dev/devmm_svm`, "
                                              "`/dev/hisi_hdc`)")
        return text

    def _python(self, raw: str, start: int, index: LineIndex) -> None:
        found = _CUDA_IN_PYTHON.search(raw)
        if found is None:
            return
        line, col = index.position(start + found.start())
        self.report_at(line, col, f"Python code run from the shell uses CUDA (`{found.group(0).strip()}`): on an "
                                  "Ascend host it needs `import torch_npu` and the `npu` device (`.npu()`, "
                                  "`torch.npu`); npu-migrate does not rewrite code inside shell strings")


CASES = [
    Invalid(  # minRF's advanced/run_multi.sh: a host check and a clean-up of GPU processes
        """\
        COMMAND="lsof /dev/nvidia* | awk '{print \\$2}' | xargs -I {} kill {}"
        for host in `cat hostfiles`; do
            ssh -o StrictHostKeyChecking=no $host "python -c 'import torch; print(torch.randn(100).cuda())'"
        done
        """,
        path="run_multi.sh",
        lines=(1, 3),
    ),
    Invalid(
        """\
        python3 -c "import torch; assert torch.cuda.is_available()" && torchrun train.py
        """,
        path="check.sh",
        lines=(1,),
    ),
    Valid(  # no CUDA in the snippet; text, comments and other `-c` options stay quiet
        """\
        python -c 'import torch; print(torch.__version__)'
        # python -c 'torch.randn(1).cuda()'
        echo "see /dev/nvidia0"
        bash -c "make -j8"
        """,
        path="check.sh",
    ),
]
