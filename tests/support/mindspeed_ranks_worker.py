"""One rank of tests/integrations/test_mindspeed_ranks.py: examples/megatron_gpt.py's GPT across ranks under the real
MindSpeed, in a MindSpeed pair's venv (tools/versions.py mindspeed: the real torch_npu on the fake CANN, Megatron-LM's
megatron/ on PYTHONPATH), each rank a process on its own device of the fake (NPU_FAKE_DEVICE_COUNT = WORLD).

    python tests/support/mindspeed_ranks_worker.py RANK WORLD PORT STEPS OUT [tp,pp|tp|pp]

Every rank does what a MindSpeed user's training script does: ``import mindspeed.megatron_adaptor`` before Megatron
(its patches, and torch_npu's transfer_to_npu, apply at import), ``torch.npu.set_device(rank)``, one process group
with HCCL for npu tensors (gloo for CPU ones: ``cpu:gloo,npu:hccl``), then torch_ext.megatron.patch() after the
adaptor's import, on every rank (docs/megatron.md, "Where patch() goes").

tp,pp (the default) runs both, one after the other, in the same processes and group.
tp: tensor parallelism WORLD, the example's train_gpt on npu:<rank>: MindSpeed alone first (Megatron's torch path,
fusion off: the MindSpeed stage's baseline), then patch() and the same run with fusion on, then unpatch().
pp: pipeline parallelism 2 through Megatron's schedule (get_forward_backward_func(), 1F1B, p2p over HCCL) as
MindSpeed adapts it to the npu: first PP = 2 under MindSpeed alone (fusion off, no patch(): the baseline), then with
patch() in place PP = 1 (every rank the whole model, the schedule without pipelining) and PP = 2 (stage <rank>: one
of the two layers), all three on the same initial weights (the PP = 1 model's, each stage loading its part), the
same global batch in the same 2 micro-batches, the same Adam.

Writes OUT.RANK.json: the loss curves, the npu_ext operators and c10d collectives each run dispatched (counted by
name) and the devices of the npu_ext ops' tensors, the fake CANN's aclnn / acl_op launches per run, the p2p operations
of the PP runs (P2PLog), status() and whose object each target holds at each step. Asserts nothing itself.
"""

import collections
import datetime
import json
import sys
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore")
import mindspeed.megatron_adaptor  # noqa: E402,F401  (as MindSpeed's users: before Megatron; patches at import)

import paths  # noqa: E402  (tests/support is sys.path[0]: this script's folder)
import torch_ext.megatron as tm  # noqa: E402
import helpers  # noqa: E402
from mindspeed_worker import counters, targets  # noqa: E402

megatron_gpt = paths.example("megatron_gpt")

MICRO_BATCHES = 2  # of 2 sequences each: the example's batch of 4


class DeviceLog(helpers.DeviceLog):
    """helpers.DeviceLog with what the worker writes."""

    def facts(self):
        return {"ops": dict(collections.Counter(o for o in self.ops if o.startswith(("npu_ext.", "c10d.")))),
                "devices": {k: sorted(v) for k, v in self.devices.items()}}


def delta(a, b):
    return {k: v - a.get(k, 0) for k, v in b.items() if v != a.get(k, 0)}


def logged(fn, *args, **kwargs):
    """fn(*args, **kwargs) under a DeviceLog: (its result, the operators and the fake CANN's launches)."""
    c0 = counters()
    log = DeviceLog()
    with log:
        out = fn(*args, **kwargs)
    torch.npu.synchronize()
    return out, dict(log.facts(), launches=delta(c0, counters()))


def snapshot(name, returned=None):
    return {"step": name, "status": tm.status(), "whose": targets(), "returned": returned}


def run_tp(world, steps):
    """MindSpeed alone, then MindSpeed + patch(), at TP = world on npu:<rank> (the module's docstring)."""
    from megatron.core import parallel_state

    log = [snapshot("mindspeed")]
    with megatron_gpt.cpu_megatron(tp=world, device="npu"):
        seen = {"tp": parallel_state.get_tensor_model_parallel_world_size(),
                "tp_rank": parallel_state.get_tensor_model_parallel_rank(),
                "device": str(torch.empty(0, device="npu").device)}
        base, base_facts = logged(megatron_gpt.train_gpt, steps, fused=False, tp=world, device="npu")
        log.append(snapshot("patch", tm.patch()))
        try:
            ours, ours_facts = logged(megatron_gpt.train_gpt, steps, fused=True, tp=world, device="npu")
        finally:
            tm.unpatch()
        log.append(snapshot("unpatch"))
    return dict(seen, base=base, ours=ours, base_facts=base_facts, ours_facts=ours_facts, steps=log)


def gpt(pp, seq, vocab, full=None, device="npu", fused=True):
    """The example's GPT (train_gpt's configuration; masked-softmax fusion `fused`) for this rank's pipeline stage,
    on the npu; with
    `full` (a state dict of the whole model), the stage loads its part of it: layer i of stage s is the whole model's
    layer s * (layers per stage) + i."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True,
                               pipeline_model_parallel_size=pp, pipeline_dtype=torch.bfloat16, bf16=True,
                               add_bias_linear=True, bias_activation_fusion=True, masked_softmax_fusion=fused,
                               attention_softmax_in_fp32=True, hidden_dropout=0.0, attention_dropout=0.0)
    model = GPTModel(config, get_gpt_layer_local_spec(), vocab_size=vocab, max_sequence_length=seq,
                     pre_process=parallel_state.is_pipeline_first_stage(),
                     post_process=parallel_state.is_pipeline_last_stage())
    if full is not None:
        per_stage = config.num_layers // pp
        offset = parallel_state.get_pipeline_model_parallel_rank() * per_stage
        mine = model.state_dict()
        for key in mine:
            parts = key.split(".")
            if parts[:2] == ["decoder", "layers"]:
                parts[2] = str(int(parts[2]) + offset)
            if isinstance(mine[key], torch.Tensor):  # (not the modules' _extra_state)
                mine[key] = full[".".join(parts)]
        model.load_state_dict(mine)
    return Float16Module(config, model).to(device)


def train_pipelined(steps, pp, full, seq=32, vocab=96, fused=True):
    """`steps` Adam steps of the stage's model through Megatron's schedule (get_forward_backward_func()) on the
    example's batch of 4 in MICRO_BATCHES micro-batches; the losses (the mean of the micro-batches' losses, on the
    last stage; None on the others)."""
    from megatron.core import parallel_state
    from megatron.core.pipeline_parallel import get_forward_backward_func

    model = gpt(pp, seq, vocab, full, fused=fused)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, foreach=False)
    tokens = torch.randint(0, vocab, (4, seq + 1), generator=torch.Generator().manual_seed(7)).npu()
    ids, labels = tokens[:, :-1], tokens[:, 1:]
    position_ids = torch.arange(seq).expand(4, seq).npu()
    causal = torch.ones(1, 1, seq, seq, dtype=torch.bool).triu(1).npu()
    size = 4 // MICRO_BATCHES
    micro = [(ids[i:i + size], position_ids[i:i + size], labels[i:i + size]) for i in range(0, 4, size)]

    def loss_func(output):
        loss = output.float().mean()
        return loss, {"loss": loss.detach().clone()}  # the schedule divides `loss` in place

    def forward_step(data_iterator, model):
        i, p, lab = next(data_iterator)
        return model(i, p, causal, labels=lab), loss_func

    forward_backward = get_forward_backward_func()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        reduced = forward_backward(forward_step_func=forward_step, data_iterator=iter(micro), model=[model],
                                   num_microbatches=MICRO_BATCHES, seq_length=seq, micro_batch_size=size,
                                   forward_only=False)
        opt.step()
        if parallel_state.is_pipeline_last_stage():
            losses.append(sum(r["loss"] for r in reduced).item() / MICRO_BATCHES)
    return {"losses": losses if parallel_state.is_pipeline_last_stage() else None,
            "schedule": forward_backward.__module__ + "." + forward_backward.__name__,
            "first_stage": parallel_state.is_pipeline_first_stage(),
            "last_stage": parallel_state.is_pipeline_last_stage()}


class P2PLog:
    """Counts the point-to-point operations Megatron's schedule hands torch.distributed.batch_isend_irecv (its p2p
    path by default, batch_p2p_comm), by kind and peer, with their tensors' devices and dtypes; calls it unchanged."""

    def __init__(self):
        self.ops = collections.Counter()
        self.tensors = set()

    def __enter__(self):
        self.original = dist.batch_isend_irecv

        def batch_isend_irecv(ops):
            for op in ops:
                self.ops[f"{op.op.__name__} {op.peer}"] += 1
                self.tensors.add(f"{op.tensor.device} {op.tensor.dtype}")
            return self.original(ops)

        dist.batch_isend_irecv = batch_isend_irecv
        return self

    def __exit__(self, *exc):
        dist.batch_isend_irecv = self.original

    def facts(self):
        return {"p2p": dict(self.ops), "p2p_tensors": sorted(self.tensors)}


def pipelined(steps, pp, full, fused=True):
    """train_pipelined at PP = pp (the groups set up anew) under a P2PLog: (its result, its facts)."""
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(pipeline_model_parallel_size=pp)
    with P2PLog() as p2p:
        out, facts = logged(train_pipelined, steps, pp, full, fused=fused)
    facts.update(p2p.facts())
    return out, facts


def run_pp(world, steps):
    """PP = 2 under MindSpeed alone (fusion off, as run_tp's baseline), then, with patch() in place, PP = 1 and
    PP = 2 (the module's docstring)."""
    from megatron.core import parallel_state

    log = [snapshot("mindspeed")]
    with megatron_gpt.cpu_megatron(device="npu"):  # the group already there; TP = 1, PP = 1
        assert parallel_state.get_pipeline_model_parallel_world_size() == 1
        full = {k: v.detach().clone() for k, v in gpt(1, 32, 96, device="cpu").module.state_dict().items()
                if isinstance(v, torch.Tensor)}
        alone2, alone2_facts = pipelined(steps, world, full, fused=False)
        log.append(snapshot("patch", tm.patch()))
        try:
            pp1, pp1_facts = pipelined(steps, 1, full)
            pp2, pp2_facts = pipelined(steps, world, full)
            seen = {"pp": parallel_state.get_pipeline_model_parallel_world_size(),
                    "pp_rank": parallel_state.get_pipeline_model_parallel_rank(),
                    "device": str(torch.empty(0, device="npu").device)}
        finally:
            tm.unpatch()
    log.append(snapshot("unpatch"))
    return dict(seen, pp1=pp1, pp2=pp2, pp1_facts=pp1_facts, pp2_facts=pp2_facts, alone2=alone2,
                alone2_facts=alone2_facts, steps=log)


def main(argv):
    rank, world, port, steps, out = int(argv[0]), int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    modes = (argv[5] if len(argv) > 5 else "tp,pp").split(",")
    import importlib

    from megatron.core import package_info

    torch.set_num_threads(1)  # one core per rank
    torch.npu.set_device(rank)  # as MindSpeed does with the local rank
    # a rank that dies leaves the other waiting in a collective: a short timeout
    dist.init_process_group("cpu:gloo,npu:hccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=300))
    try:
        with torch.compiler.set_stance("force_eager"):  # Megatron's jit_fuser eagerly, as the other Megatron tests
            result = {mode: {"tp": run_tp, "pp": run_pp}[mode](world, steps) for mode in modes}
        dist.barrier()
    finally:
        dist.destroy_process_group()
    result.update(megatron=package_info.__version__, torch_npu=importlib.import_module("torch_npu").__version__)
    with open(f"{out}.{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
