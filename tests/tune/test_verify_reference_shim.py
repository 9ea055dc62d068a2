"""verify's CPU reference under a CUDA build of torch on a machine without a GPU (the tune bench's
environment: torchvision needs torch 2.14.1's CUDA wheel): the reference claims
`torch.cuda.is_available()` so that the script takes its GPU path, and `torch.accelerator` must not
then initialise the CUDA the build names."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# a CPU build of torch stands in for the CUDA build: `_accelerator_getAccelerator` is made to name
# CUDA, as a CUDA build does; the CPU build's CUDA calls raise as a driverless CUDA build's do
SCRIPT = textwrap.dedent("""\
    import torch
    torch._C._accelerator_getAccelerator = lambda: torch.device("cuda")
    from npu_migrate.verify.runner import _install_cuda_shim
    _install_cuda_shim()
    torch.cuda.is_available = lambda: True  # what script mode's reference claims
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    print(torch.accelerator.is_available(), torch.accelerator.current_accelerator(check_available=True))
    """)


def test_the_cpu_reference_has_no_accelerator_whatever_torch_was_built_for() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "None"]
