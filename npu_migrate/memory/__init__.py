"""`npu-migrate memory`: analysis of PyTorch / torch_npu memory snapshots and msMemScope data."""
