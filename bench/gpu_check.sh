#!/usr/bin/env bash
# The GPU half of issues 17 (item 7) and 26 (item 6), prepared as one short run for a machine with
# a CUDA GPU (the lent machines have torch 2.11; the tests pin 2.13):
#   1. bench/verify_torch_apis.py: every torch API the verifier uses exists on this torch;
#   2. tests/verify/test_verify_on_gpu.py (skipped everywhere else): `verify --reference cuda`
#      against the CPU- and the GPU-backed emulation (a linear and a convolutional model, the CUDA
#      reference with TF32 kept off), faults located at their line, `verify --portable --devices cpu,cuda`;
#   3. the CLI a user types, on the bundled CUDA demo: `apply`, then `verify --reference cuda`,
#      its JSON verdict kept.
# Every step's exit code is printed and kept; the script exits with the first non-zero one (3 when
# no GPU is visible, before any step).
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
status=0

step() {  # step NAME COMMAND...: run, print and keep the exit code
  local name=$1
  shift
  "$@"
  local code=$?
  echo "gpu_check: $name: exit $code" | tee -a "$out/steps.txt"
  if [ "$status" -eq 0 ] && [ "$code" -ne 0 ]; then status=$code; fi
  return 0
}

if compgen -G ".whl/*.whl" >/dev/null; then
  step "install libcst" python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
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

step "torch APIs" bash -c "python3 bench/verify_torch_apis.py | tee '$out/torch_apis.txt'"
step "pytest" bash -c "python3 -m pytest tests/verify/test_verify_on_gpu.py -n 0 -p no:cacheprovider -rs -v 2>&1 \
  | tee '$out/pytest.txt'"
demo=$(mktemp -d)
step "demo apply" bash -c "python3 -m npu_migrate apply fixtures/cuda_project --output-dir '$demo/npu' --no-cache \
  >'$out/demo_apply.txt' 2>&1"
step "demo verify --reference cuda" bash -c "python3 -m npu_migrate verify --original fixtures/cuda_project \
  --migrated '$demo/npu' --reference cuda --no-reference-store --format json -- train.py \
  >'$out/demo_verify.json' 2>'$out/demo_verify.err'"
echo "gpu_check: status $status" | tee -a "$out/steps.txt"
exit $status
