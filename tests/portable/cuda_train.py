"""A CUDA training script as people write it: CPU fallback, seeding, AMP, a DataLoader and DDP
when launched with several processes. The end-to-end test migrates it with --target portable."""

import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def setup() -> int:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    return world_size


def main() -> None:
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    world_size = setup()
    use_amp = device.type == "cuda"
    data = TensorDataset(torch.randn(256, 16), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=32, shuffle=True, pin_memory=torch.cuda.is_available())
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    if torch.cuda.is_available():
        model = model.cuda()
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
    for _ in range(3):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
            optimizer.zero_grad()
            with torch.cuda.amp.autocast(enabled=use_amp, dtype=torch.bfloat16):
                loss = torch.nn.functional.mse_loss(model(inputs).float(), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    print(f"device={device.type}")
    print(f"loss={loss.item():.6f}")


if __name__ == "__main__":
    main()
