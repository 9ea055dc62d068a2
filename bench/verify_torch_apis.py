"""The torch APIs `npu-migrate verify` uses, checked against the installed torch.

    python bench/verify_torch_apis.py

The verifier must run on the torch the lent GPU machines have (2.11) as well as on the one the
tests pin (2.13). This lists every torch name the code of npu_migrate/verify names (collected from
its source: `torch.a.b` chains and `from torch.x import y`, the same collection
tests/verify/test_verify_gpu_half.py compares this list with), the names it reaches through an
alias or on tensor objects, and those it looks up only where present (GUARDED, with what it does
without them). It resolves each on the installed torch and exits 1 when an unguarded one is
missing: bench/gpu_check.sh runs it on the GPU machine's torch 2.11 first.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# torch names the verifier's source spells out (kept equal to `used_names()` by the test)
APIS = [
    "torch.Tensor.backward", "torch.Tensor.cuda", "torch.Tensor.pin_memory", "torch.Tensor.register_hook",
    "torch._C._profiler._EventType", "torch.__version__", "torch.accelerator.current_accelerator",
    "torch.accelerator.current_stream", "torch.accelerator.is_available",
    "torch.amp.autocast_mode.autocast",
    "torch.autograd.backward", "torch.backends.cuda.is_built", "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
    "torch.cuda.current_device", "torch.cuda.device_count", "torch.cuda.is_available",
    "torch.cuda.is_current_stream_capturing",
    "torch.cuda.is_bf16_supported", "torch.cuda.set_device", "torch.cuda.synchronize", "torch.device", "torch.equal",
    "torch.float32", "torch.float64", "torch.isfinite", "torch.load", "torch.manual_seed", "torch.native_dropout",
    "torch.nn.Module.__init__", "torch.ops.aten._to_copy.default",
    "torch.nn.Module.cuda", "torch.nn.Module.train", "torch.nn.functional", "torch.nn.modules.module",
    "torch.optim.Optimizer.__init__", "torch.optim.SGD", "torch.optim.optimizer", "torch.overrides.TorchFunctionMode",
    "torch.profiler.ProfilerActivity", "torch.profiler.profile", "torch.random", "torch.save",
    "torch.set_float32_matmul_precision", "torch.strided", "torch.utils._foreach_utils",
    "torch.utils._python_dispatch.TorchDispatchMode", "torch.utils.data.DataLoader", "torch.view_as_real",
    "torch.where", "torch.zeros_like",
]
# reached through an alias, an object or a class the source does not spell as a torch.a.b chain
INDIRECT = [
    "torch.utils._foreach_utils._get_foreach_kernels_supported_devices",
    "torch.nn.modules.module.register_module_forward_pre_hook", "torch.nn.modules.module.register_module_forward_hook",
    "torch.optim.optimizer.register_optimizer_step_pre_hook", "torch.optim.optimizer.register_optimizer_step_post_hook",
    "torch.Tensor.untyped_storage", "torch.UntypedStorage.nbytes", "torch.UntypedStorage._cdata",
    "torch.Tensor.to_dense", "torch.Tensor.layout", "torch.nn.Module.register_forward_hook",
    "torch.nn.Module.register_forward_pre_hook", "torch.nn.Module.register_full_backward_hook",
    "torch.cuda.reset_peak_memory_stats", "torch.cuda.max_memory_allocated", "torch.cuda.memory_allocated",
    "torch._C._set_cublas_allow_tf32",
]
# looked up only where present; what the verifier does without them
GUARDED = {
    "torch.npu.is_available": "exists only with torch_npu or the emulation; checked after either is set up",
    "torch.npu.device_count": "as torch.npu.is_available",
    "torch.backends.cudnn.fp32_precision": "torch 2.9+ (getattr): older torch has only allow_tf32, which is kept off",
    "torch.backends._FP32Precision": "torch 2.9+ (getattr): cudnn.conv/rnn fp32_precision left as torch has it",
    "torch.nn.Module.register_full_backward_pre_hook": "getattr: not recorded where absent",
    "torch.optim.optimizer._get_foreach_kernels_supported_devices": "hasattr: patched only where torch has it",
}


def used_names(folder: Path = ROOT / "npu_migrate" / "verify") -> set[str]:
    """The torch names the source spells out: the longest `torch.a.b` chains and the names imported
    from torch modules (`from torch.x import y` -> torch.x.y, `import torch.x as z` -> torch.x)."""
    names: set[str] = set()
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch":
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names if alias.name.startswith("torch.") and alias.asname)
            elif isinstance(node, ast.Attribute):
                parts, current = [], node
                while isinstance(current, ast.Attribute):
                    parts.append(current.attr)
                    current = current.value
                if isinstance(current, ast.Name) and current.id == "torch":
                    names.add(".".join(["torch", *reversed(parts)]))
    return {name for name in names if not any(other.startswith(name + ".") for other in names)}


def resolve(name: str) -> bool:
    """Whether `name` exists on the installed torch (a module, or an attribute chain from one)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            return False
        return True
    return False


def main() -> int:
    import torch

    missing = [name for name in APIS + INDIRECT if not resolve(name)]
    absent_guarded = [name for name in GUARDED if not resolve(name)]
    print(f"torch {torch.__version__}: {len(APIS) + len(INDIRECT)} APIs used unguarded, "
          f"{len(missing)} missing{': ' + ', '.join(missing) if missing else ''}")
    for name in absent_guarded:
        print(f"  absent, guarded: {name} ({GUARDED[name]})")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
