"""Train a tiny Megatron-LM GPT (megatron-core) on the CPU (or an Ascend NPU: ``--device npu``), once as Megatron
runs it and once through ``torch_ext.megatron.patch()``, and print both loss curves side by side.

    pip install megatron-core                # a release of the tested range (docs/megatron.md#releases)
    python examples/megatron_gpt.py --steps 20
    python examples/megatron_gpt.py --steps 20 --device npu     # with torch_npu and torch_ext's NPU kernels

The model: GPTModel with the local (non-Transformer-Engine) layer spec, 2 layers, biases, bf16
(Float16Module), causal attention, ``bias_activation_fusion=True``. The first run has
``masked_softmax_fusion=False``: on a machine without CUDA, Megatron's fused softmax needs its CUDA extension
(``ModuleNotFoundError: scaled_masked_softmax_cuda``), so that is how Megatron trains here. The second run
turns the fusion on after ``torch_ext.megatron.patch()``: the fused softmax and its backward run as
``npu_ext.scaled_masked_softmax(_backward)``, the MLP's bias-GELU backward as ``npu_ext.gelu_backward_v2``
(on an NPU: the aclnn kernels). Same data, same initial weights, same optimizer; the script exits with status 1
if the curves differ by more than bf16 rounding explains (2% per step).

On the CPU, GPTModel needs two helpers that Megatron only provides for CUDA; ``cpu_megatron()`` below stands
in for them (on an Ascend NPU, MindSpeed and torch_npu provide both): GlobalMemoryBuffer.get_tensor allocates
on ``torch.cuda.current_device()``, and DotProductAttention forks the CUDA RNG tracker around attention dropout.
``--device npu`` trains the same model (built on the CPU, same initial weights) on the ``npu`` device with the
same stand-ins (the buffer on the NPU) and HCCL for the npu tensors Megatron all-reduces (its vocab-parallel cross
entropy does even at TP = 1).

Adam runs per parameter (``foreach=False``): the arithmetic PyTorch uses on the CPU anyway, and on the NPU the one
that needs no multi-tensor (``aclnnForeach*``) kernels.
"""

import argparse
import contextlib
import functools
import operator
import socket
import sys
import warnings

import torch

import torch_ext.megatron


@contextlib.contextmanager
def cpu_megatron(tp=1, device="cpu"):
    """A one-process gloo group (unless a process group is already initialized: then that one, e.g. 2 ranks),
    Megatron's model-parallel state (TP = tp, PP = 1), and the two CUDA-only helpers replaced by CPU ones for
    the duration. device="npu": the buffer on the NPU and the group with HCCL for npu tensors (gloo for CPU ones)."""
    from megatron.core import parallel_state, tensor_parallel
    from megatron.core import utils as megatron_utils

    def get_tensor(self, tensor_shape, dtype, name, mem_alloc_context=None):
        n = functools.reduce(operator.mul, tensor_shape, 1)
        if self.buffer.get((name, dtype)) is None or self.buffer[(name, dtype)].numel() < n:
            self.buffer[(name, dtype)] = torch.empty(n, dtype=dtype, device=device)
        return self.buffer[(name, dtype)][:n].view(*tensor_shape)

    class NoCudaRngTracker:  # attention dropout is 0 here; nothing to fork
        def fork(self, *args, **kwargs):
            return contextlib.nullcontext()

    saved = (megatron_utils.GlobalMemoryBuffer.get_tensor, tensor_parallel.get_cuda_rng_tracker)
    megatron_utils.GlobalMemoryBuffer.get_tensor = get_tensor
    tensor_parallel.get_cuda_rng_tracker = NoCudaRngTracker
    own_group = not torch.distributed.is_initialized()
    if own_group:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        backend = "gloo" if device == "cpu" else f"cpu:gloo,{device}:hccl"
        torch.distributed.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    try:
        yield
    finally:
        parallel_state.destroy_model_parallel()
        if own_group:
            torch.distributed.destroy_process_group()
        megatron_utils.GlobalMemoryBuffer.get_tensor, tensor_parallel.get_cuda_rng_tracker = saved


def train_gpt(steps, fused, seed=0, seq=32, vocab=96, tp=1, device="cpu"):
    """The per-step losses of the tiny bf16 GPT trained `steps` steps with Adam on one fixed batch.
    fused: Megatron's masked_softmax_fusion (needs torch_ext.megatron.patch() without CUDA). tp: the
    tensor-parallel size, the one cpu_megatron() set up (each rank then holds its shard of the same initial
    weights, trains on the same batch and gets the same losses). device: where it trains (the model is built on
    the CPU, so the initial weights are the same everywhere, then moved)."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.manual_seed(seed)
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True,
                               tensor_model_parallel_size=tp, bf16=True, add_bias_linear=True,
                               bias_activation_fusion=True, masked_softmax_fusion=fused,
                               attention_softmax_in_fp32=True, hidden_dropout=0.0, attention_dropout=0.0)
    model = Float16Module(config, GPTModel(config, get_gpt_layer_local_spec(), vocab_size=vocab,
                                           max_sequence_length=seq)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, foreach=False)
    tokens = torch.randint(0, vocab, (4, seq + 1), generator=torch.Generator().manual_seed(7)).to(device)
    ids, labels = tokens[:, :-1], tokens[:, 1:]
    position_ids = torch.arange(seq).expand(4, seq).to(device)
    # Megatron's own (unfused) path builds a default causal mask on cuda: give it the mask. The patched fused
    # path generates it (fix_triu_mask) and ignores this one, as Megatron's CUDA kernel does.
    causal = torch.ones(1, 1, seq, seq, dtype=torch.bool).triu(1).to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model(ids, position_ids, causal, labels=labels).float().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def curves_agree(ours, base, rel=0.02):
    return len(ours) == len(base) and all(abs(a - b) <= rel * abs(b) for a, b in zip(ours, base))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", choices=["cpu", "npu"], default="cpu",
                   help="where to train (npu: needs torch_npu and torch_ext's NPU kernels)")
    args = p.parse_args(argv)
    if args.device == "npu" and not torch_ext._npu.LOADED:
        p.error(f"--device npu: torch_ext's NPU kernels are not loaded ({torch_ext._npu.why_not_loaded()})")
    warnings.filterwarnings("ignore")  # megatron-core's notes about Transformer Engine, Apex, deprecations
    # Megatron's jit_fuser is torch.compile: its bias-GELU is compiled on the first call of each run (slow on
    # 2 cores, and not what this compares); force_eager runs the same Python formulas eagerly.
    with cpu_megatron(device=args.device), torch.compiler.set_stance("force_eager"):
        base = train_gpt(args.steps, fused=False, device=args.device)
        torch_ext.megatron.patch()
        status = torch_ext.megatron.status()
        try:
            ours = train_gpt(args.steps, fused=True, device=args.device)
        finally:
            torch_ext.megatron.unpatch()
    from megatron.core import package_info

    print(f"megatron-core {package_info.__version__}, torch {torch.__version__}, Python {sys.version.split()[0]}")
    if args.device != "cpu":
        print(f"device: {args.device}")
    print("torch_ext.megatron.status() after patch():", *(f"{t}: {s}" for t, s in status.items()), sep="\n  ")
    print(f"{'step':>4}  {'Megatron (torch path)':>22}  {'torch_ext.megatron':>18}")
    for i, (b, o) in enumerate(zip(base, ours)):
        print(f"{i:>4}  {b:>22.4f}  {o:>18.4f}")
    ok = curves_agree(ours, base)
    print(("OK: " if ok else "MISMATCH: ") + f"{args.steps} steps, loss {base[0]:.3f} -> {base[-1]:.3f} (Megatron), "
          f"{ours[0]:.3f} -> {ours[-1]:.3f} (patched)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
