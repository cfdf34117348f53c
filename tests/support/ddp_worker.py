"""One rank of tests/training/test_ddp.py: DDP over gloo on localhost, the example's TinyBlock with torch_ext."""

import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import paths
import torch_ext

_example = paths.example("train_tiny")
TinyBlock, make_data = _example.TinyBlock, _example.make_data

STEPS, BATCH = 3, 8


def make_model():
    torch.manual_seed(0)
    model = torch_ext.nn.convert(TinyBlock())
    model.use_torch_ext = True
    return model


def train(model, tokens, labels, rank=0, world=1):
    """SGD steps; returns the gradients of the first step and the final parameters."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per = BATCH // world
    first = None
    for step in range(STEPS):
        opt.zero_grad()
        x, y = tokens[step, rank * per:(rank + 1) * per], labels[step, rank * per:(rank + 1) * per]
        F.binary_cross_entropy_with_logits(model(x), y).backward()
        if first is None:
            first = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
    return first, [p.detach().clone() for p in model.parameters()]


def main(rank, world, port, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    tokens, labels = make_data(STEPS, BATCH, 12, 64)
    grads, params = train(model, tokens, labels, rank, world)
    if rank == 0:
        torch.save({"grads": grads, "params": params}, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
