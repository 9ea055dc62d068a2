# A minimal training script for minGPT's GPT (karpathy/minGPT mingpt/model.py, MIT, copied unmodified
# from a clone by bench/verify_faults.py): random token batches, AdamW, a loop that prints the loss.
# Written here for the benchmark (minGPT's own trainer is exercised by bench/verify_public_scripts.py).
import argparse

import torch
from mingpt.model import GPT

parser = argparse.ArgumentParser()
parser.add_argument('--iters', type=int, default=100)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--seed', type=int, default=1337)
args = parser.parse_args()

torch.manual_seed(args.seed)
device = 'cuda' if torch.cuda.is_available() else 'cpu'
data = torch.randint(0, 64, (4096,))


def get_batch():
    ix = torch.randint(len(data) - 16, (args.batch_size,))
    x = torch.stack([data[i:i + 16] for i in ix])
    y = torch.stack([data[i + 1:i + 17] for i in ix])
    return x.to(device), y.to(device)


config = GPT.get_default_config()
config.model_type = 'gpt-nano'
config.vocab_size = 64
config.block_size = 16
config.embd_pdrop = config.resid_pdrop = config.attn_pdrop = 0.0
model = GPT(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
for it in range(args.iters):
    X, Y = get_batch()
    logits, loss = model(X, Y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    print(f"iter {it}: loss {loss.item():.4f}")
