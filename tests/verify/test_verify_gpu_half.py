"""The GPU half made ready without a GPU (issue 26, item 6): the CUDA reference keeps TF32 off
whatever the script asks, and every torch API the verifier uses is listed and exists, so that
bench/gpu_check.sh can check the same list against the GPU machine's torch 2.11."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from npu_migrate.verify import tf32

ROOT = Path(__file__).resolve().parents[2]


def _apis():
    spec = importlib.util.spec_from_file_location("verify_torch_apis", ROOT / "bench" / "verify_torch_apis.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_list_is_exactly_what_the_verifier_names():
    apis = _apis()
    used = apis.used_names()
    assert used - set(apis.APIS) - set(apis.GUARDED) - set(apis.INDIRECT) == set(), "list the new torch API"
    assert set(apis.APIS) - used == set(), "drop the API the verifier no longer uses"


def test_every_unguarded_api_exists_on_this_torch():
    apis = _apis()
    assert [name for name in apis.APIS + apis.INDIRECT if not apis.resolve(name)] == []
    assert not apis.resolve("torch.no_such_module.thing") and not apis.resolve("torch.Tensor.no_such_method")


@pytest.fixture
def restored(monkeypatch):
    """keep_off() patches torch's classes: put them back after the test."""
    matmul_type, cudnn_type = type(torch.backends.cuda.matmul), type(torch.backends.cudnn)
    monkeypatch.setattr(matmul_type, "__setattr__", matmul_type.__setattr__)
    for name in ("allow_tf32", "fp32_precision"):
        if name in cudnn_type.__dict__:
            monkeypatch.setattr(cudnn_type, name, cudnn_type.__dict__[name])
    precision_type = getattr(torch.backends, "_FP32Precision", None)
    if precision_type is not None:
        monkeypatch.setattr(precision_type, "__setattr__", precision_type.__setattr__)
    monkeypatch.setattr(torch, "set_float32_matmul_precision", torch.set_float32_matmul_precision)
    monkeypatch.setattr(tf32, "REQUESTS", [])
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    yield
    torch._C._set_cublas_allow_tf32(flags[0])
    torch._C._set_cudnn_allow_tf32(flags[1])
    torch._C._set_float32_matmul_precision(flags[2])


def test_the_cuda_reference_keeps_tf32_off_and_records_the_scripts_requests(restored):
    tf32.keep_off()
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
    assert torch.get_float32_matmul_precision() == "highest"
    assert [r["setting"] for r in tf32.REQUESTS] == ["torch.backends.cuda.matmul.allow_tf32",
                                                      "torch.backends.cudnn.allow_tf32",
                                                      "torch.set_float32_matmul_precision"]
    assert all(r["site"].startswith(__file__) for r in tf32.REQUESTS), tf32.REQUESTS
    torch.backends.cudnn.allow_tf32 = False  # turning it off is not a request
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True  # other settings pass through
    assert len(tf32.REQUESTS) == 3
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
