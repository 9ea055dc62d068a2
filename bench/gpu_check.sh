#!/usr/bin/env bash
# The GPU half of issue 17 (item 7), prepared as one short run for a machine with a CUDA GPU:
#   1. tests/verify/test_verify_on_gpu.py (skipped everywhere else): `verify --reference cuda`
#      against the CPU- and the GPU-backed emulation, two faults located at their line, and
#      `verify --portable --devices cpu,cuda`;
#   2. the same CLI a user types, once, on the bundled CUDA demo, with its JSON verdict kept.
#
# The GPU machine's Python has torch but not libcst: put a libcst wheel for its Python in .whl/
# first (on a machine with pip access, in the repository root):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_17_x86_64 -d .whl libcst==1.9.0
# then run this script there with .whl carried. Results go to $OUT (or ./gpu-check when unset).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check}
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 2
  export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
python3 - <<'EOF' | tee "$out/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0))
EOF
grep -q "available True" "$out/device.txt" || { echo "gpu_check: torch sees no CUDA device here; nothing checked"; exit 3; }
status=0
python3 -m pytest tests/verify/test_verify_on_gpu.py -n 0 -p no:cacheprovider -rs -v 2>&1 | tee "$out/pytest.txt" \
  || status=1
demo=$(mktemp -d)
python3 -m npu_migrate apply fixtures/cuda_project --output-dir "$demo/npu" --no-cache >/dev/null 2>&1
python3 -m npu_migrate verify --original fixtures/cuda_project --migrated "$demo/npu" --reference cuda \
  --format json -- train.py >"$out/demo_verify.json" 2>"$out/demo_verify.err"
echo "demo verify --reference cuda: exit $?" | tee -a "$out/pytest.txt"
exit $status
