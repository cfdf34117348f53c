"""Train a tiny transformer block on synthetic data with torch_ext, checking every step against plain PyTorch.

The model uses every torch_ext function: causal scaled-masked-softmax attention, a GELU MLP, PReLU, an
MoE-style layer whose per-expert biases are added with grouped_bias_add, and a logit head. Two copies start
from the same weights: one runs the plain-PyTorch modules/functions, the other is the same model after
``torch_ext.nn.convert(model)`` plus ``use_torch_ext=True`` (the one-line change a training script needs).
Both train with the same data and optimizer; the losses must agree at every step (exit status 1 otherwise).

    python examples/train_tiny.py --steps 50             # fp32 on the CPU
    python examples/train_tiny.py --steps 50 --compile   # the torch_ext model under torch.compile
    python examples/train_tiny.py --steps 50 --device npu   # both models on an Ascend NPU (torch_npu)
"""

import argparse
import copy
import math
import sys
import time

import torch
import torch.nn.functional as F

import torch_ext


class TinyBlock(torch.nn.Module):
    def __init__(self, vocab=64, dim=32, heads=4, experts=4, use_torch_ext=False):
        super().__init__()
        self.heads, self.experts, self.use_torch_ext = heads, experts, use_torch_ext
        self.embed = torch.nn.Embedding(vocab, dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(4 * dim, dim))
        self.act = torch.nn.PReLU(dim, init=0.1)
        self.router = torch.nn.Linear(dim, experts)
        self.expert_w = torch.nn.Parameter(torch.randn(experts, dim, dim) / math.sqrt(dim))
        self.expert_b = torch.nn.Parameter(torch.randn(experts, dim) * 0.1)
        self.head = torch.nn.Linear(dim, 3)

    # -- the five functions, in torch_ext or in plain PyTorch -------------------------------------------
    def softmax(self, scores, mask, scale):
        if self.use_torch_ext:
            return torch_ext.scaled_masked_softmax(scores, mask, scale)
        return torch.softmax((scores * scale).masked_fill(mask, -10000.0), dim=-1)

    def bias_add(self, x, group_ends):
        if self.use_torch_ext:
            return torch_ext.grouped_bias_add(x, self.expert_b, group_ends)
        counts = torch.diff(group_ends, prepend=group_ends.new_zeros(1))
        return x + self.expert_b.repeat_interleave(counts, dim=0, output_size=x.shape[0])

    def logit(self, p):
        return torch_ext.logit(p, 1e-4) if self.use_torch_ext else torch.logit(p, 1e-4)

    # ---------------------------------------------------------------------------------------------------
    def forward(self, tokens):
        b, s = tokens.shape
        x = self.embed(tokens)
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)  # a 2-D mask, adapted
        att = self.softmax(q @ k.transpose(-1, -2), causal, 1.0 / math.sqrt(q.shape[-1]))
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, -1))
        x = x + self.mlp(x)  # GELU MLP
        x = self.act(x.transpose(1, 2)).transpose(1, 2)  # PReLU over channels (dim 1)

        # MoE-style: route each token to its top expert, sort the tokens by expert, apply each expert's
        # weight, add each expert's bias to its rows (grouped bias add with cumulative group ends), unsort.
        flat = x.reshape(b * s, -1)
        gate, expert = torch.softmax(self.router(flat), -1).max(-1)
        order = torch.argsort(expert, stable=True)
        group_ends = torch.cumsum(torch.bincount(expert, minlength=self.experts), 0)
        h = torch.bmm(flat[order].unsqueeze(1), self.expert_w[expert[order]]).squeeze(1)
        h = self.bias_add(h, group_ends) * gate[order, None]
        moe = torch.empty_like(h).index_copy(0, order, h)
        x = x + moe.reshape(b, s, -1)

        # logit head: a mixture of per-class probabilities, turned back into logits
        p = torch.sigmoid(self.head(x[:, -1])).mean(-1)  # the last token sees the whole sequence
        return self.logit(p)


def make_data(steps, batch, seq, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (steps, batch, seq), generator=g)
    labels = ((tokens[..., 0] < vocab // 2) & (tokens[..., -1] < vocab // 2)).float()  # a learnable target
    return tokens, labels


def progress(step, total, loss, start, width=30):
    done = int(width * step / total)
    rate = step / max(time.time() - start, 1e-9)
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] {step}/{total} loss {loss:.4f} {rate:.1f} it/s")
    if step == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=12)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--rtol", type=float, default=1e-4, help="allowed relative loss difference per step")
    ap.add_argument("--compile", action="store_true", help="run the torch_ext model under torch.compile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=["cpu", "npu"], default="cpu",
                    help="where both models train (npu: torch_npu and torch_ext's NPU kernels)")
    args = ap.parse_args(argv)
    if args.device == "npu" and not torch_ext._npu.LOADED:
        ap.error(f"--device npu: torch_ext's NPU kernels are not loaded ({torch_ext._npu.why_not_loaded()})")

    torch.manual_seed(args.seed)
    reference = TinyBlock().to(args.device)
    model = copy.deepcopy(reference)
    torch_ext.nn.convert(model)  # nn.GELU / nn.PReLU -> torch_ext.nn.GELU / PReLU, same parameters
    model.use_torch_ext = True  # the other three functions
    opt_ref = torch.optim.AdamW(reference.parameters(), lr=args.lr)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    run = torch.compile(model) if args.compile else model

    tokens, labels = (t.to(args.device) for t in make_data(args.steps, args.batch, args.seq, 64, args.seed))
    start, worst = time.time(), 0.0
    for step in range(args.steps):
        losses = []
        for net, opt_ in ((run, opt), (reference, opt_ref)):
            opt_.zero_grad(set_to_none=True)
            loss = F.binary_cross_entropy_with_logits(net(tokens[step]), labels[step])
            loss.backward()
            opt_.step()
            losses.append(loss.item())
        rel = abs(losses[0] - losses[1]) / max(abs(losses[1]), 1e-12)
        worst = max(worst, rel)
        if not rel <= args.rtol:
            sys.stderr.write(f"\nstep {step}: loss {losses[0]!r} (torch_ext) != {losses[1]!r} (PyTorch), "
                             f"relative difference {rel:.3e} > {args.rtol:.1e}\n")
            return 1
        progress(step + 1, args.steps, losses[0], start)
    print(f"OK: {args.steps} steps on {args.device}, final loss {losses[0]:.4f} (PyTorch {losses[1]:.4f}), "
          f"max relative loss difference {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
