"""A folder that makes torchvision importable beside this project's CPU torch, for the GAN script of
bench/verify_public_scripts.py (pytorch/examples' DCGAN).

    python bench/torchvision_site.py DIR
    PYTHONPATH=DIR python bench/verify_public_scripts.py --only dcgan

The only torchvision wheels in this machine's package index are CUDA builds: their C++ operators
(`_C.so`) need libtorch_cuda, which the CPU torch lacks. torchvision then imports without its
operators (`torchvision.extension._has_ops()` is False), except that `_meta_registrations`
registers fake kernels for `torchvision::nms` and `torchvision::qnms` without that check, and
`torch.library` refuses a fake kernel for an operator nobody defined, so `import torchvision`
fails. The folder holds the torchvision release that matches the running torch (its minor version
is torch's + 15: 2.13 -> 0.28) and Pillow, installed with pip (`--no-deps --target`), and a
`sitecustomize.py` that defines those two operators' schemas (no kernel) when Python starts, in
every process that has DIR on PYTHONPATH. The scripts run unmodified: DCGAN reads torchvision's
FakeData, transforms and save_image, none of which uses a C++ operator.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

# the operators torchvision 0.28's _meta_registrations registers fake kernels for unconditionally
SITECUSTOMIZE = '''"""Written by bench/torchvision_site.py: defines torchvision's nms/qnms schemas so that a
torchvision whose C++ operators cannot load still imports (see that file)."""
import torch

_TORCHVISION = torch.library.Library("torchvision", "DEF")
for _name in ("nms", "qnms"):
    _TORCHVISION.define(f"{_name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
'''


def matching_torchvision() -> str:
    major, minor = (int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if major != 2:
        raise SystemExit(f"torch {torch.__version__}: no known matching torchvision release")
    return f"0.{minor + 15}.*"


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python bench/torchvision_site.py DIR")
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                              str(target), f"torchvision=={matching_torchvision()}", "pillow"], check=False)
    if install.returncode:
        raise SystemExit(f"pip could not install torchvision {matching_torchvision()} and pillow into {target}")
    (target / "sitecustomize.py").write_text(SITECUSTOMIZE)
    check = subprocess.run([sys.executable, "-c", "import torchvision.datasets, torchvision.utils; "
                            "print(torchvision.__version__)"], capture_output=True, text=True, check=False,
                           env={"PYTHONPATH": str(target), "PATH": ""})
    if check.returncode:
        raise SystemExit(f"torchvision does not import from {target}:\n{check.stderr[-2000:]}")
    print(f"torchvision {check.stdout.strip()} imports from {target}: PYTHONPATH={target}")


if __name__ == "__main__":
    main()
