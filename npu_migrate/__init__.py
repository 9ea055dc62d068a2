"""npu-migrate: move PyTorch code from CUDA to Ascend NPUs (torch_npu)."""

__version__ = "0.1.0"
