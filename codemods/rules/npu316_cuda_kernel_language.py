"""NPU316: the cuda-kernel-language rule."""

from __future__ import annotations

from codemods.api.cases import Invalid, Valid
from codemods.families.third_party import ThirdPartyRule, library_prefilter


class CudaKernelLanguage(ThirdPartyRule):
    """## What it does

    Kernel languages that compile for NVIDIA GPUs (TileLang, CuTe DSL / CUTLASS Python, cuda-python's `cuda.bindings`/`cuda.core`, Helion) are reported: each import, and each kernel (`@tilelang.jit`, `@T.prim_func`, `@cute.kernel`, `@cute.jit`)

    ## Why

    A kernel written in one of these languages is compiled for NVIDIA GPUs (TileLang and Helion also for AMD ones) when it first runs; torch_npu ships no backend for any of them, so the first call fails on an Ascend host while its host wrapper, migrated by the device rules, allocates its tensors on the NPU. Ascend has separate backends for some languages (tilelang-ascend, triton-ascend), whose kernels are written for the Ascend memory hierarchy: porting to them is a rewrite of the kernel. The entries, with their status and route, are the catalogue's (`codemods/data/cuda_only.json`, kind `kernel-language`); Triton (NPU308), CuPy (NPU309), PyCUDA and Numba CUDA (NPU314) keep their own codes. A CUDA guard in front of such a kernel stays on CUDA (NPU511).

    ## Example

    ```python
    import tilelang                                  # NPU316
    import tilelang.language as T

    @tilelang.jit                                    # NPU316
    def matmul(M, N, K):
        @T.prim_func                                 # NPU316
        def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16")): ...
        return kernel

    # instead: the PyTorch op the kernel implements (torch_npu runs it on the NPU)
    out = a @ b
    ```

    ## Fix safety

    No fix: diagnostic only (warning). A kernel is a design; the message says where its NPU route lies. Suppress a line with `# npu-migrate: ignore[NPU316]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU316"
    prefilter_in_code = True
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-kernel-language"
    summary = "Kernel languages for NVIDIA GPUs (TileLang, CuTe DSL, cuda-python, Helion) are reported at each import and kernel"
    prefilter = library_prefilter("NPU316")


CASES = [
    Invalid(  # a TileLang GEMM, as TileLang's examples write it
        """\
import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(M, N, K, block_M=128):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16")):
        pass
    return kernel
""",
    ),
    Invalid(  # a CuTe DSL kernel and its host function, with cuda-python's driver bindings
        """\
import cutlass
import cutlass.cute as cute
from cuda.bindings import driver


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor):
    pass


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor):
    add_kernel(mA, mB).launch(grid=(1, 1, 1), block=(128, 1, 1))
""",
    ),
    Valid(  # a project's own module named like a language is not it
        """\
from .kernels import tilelang_matmul
x = tilelang_matmul(a, b)
""",
    ),
]
