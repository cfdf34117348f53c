"""One run of MindSpeed-LLM's pretrain_gpt.py for tests/integrations/test_mindspeed_llm.py, in a process of its own
(MindSpeed-LLM's adaptor patches the whole process at import, and parses sys.argv then). Runs in the MindSpeed pair's
venv that carries MindSpeed-LLM (tools/versions.py mindspeed: the real torch_npu on the fake CANN; the
NPU_EXT_MINDSPEED_LLM* variables name its checkout and the copy of Megatron-LM with the dataset helpers compiled).
Prints one JSON line (``RESULT {...}``) of facts the test asserts on; asserts nothing itself.

  python tests/support/mindspeed_llm_worker.py alone|ours [--steps N]
  python tests/support/mindspeed_llm_worker.py RANK WORLD PORT OUT alone,ours [--steps N]

The first: world size 1 (the caller sets RANK, WORLD_SIZE, MASTER_PORT). The second: one rank of runner.ranks(),
tensor-parallel size WORLD (RANK, LOCAL_RANK and WORLD_SIZE set as torchrun does; Megatron's initialize puts the
rank on npu:<rank>), the modes one after the other in this process (reset() between them), their facts written to
OUT.RANK.json as {mode: facts}.

* alone: MindSpeed-LLM as its users run it, with masked-softmax fusion off (Megatron's torch softmax, the baseline);
* ours: the same run with torch_ext.megatron.patch() where docs/megatron.md puts it: after
  ``from mindspeed_llm import megatron_adaptor``, before ``pretrain()``; fusion on (our softmax), and our
  bias-GELU in Megatron's MLP.

The run is the user's command line (ARGS below) and pretrain_gpt.py itself, run as ``__main__`` from its checkout
(runpy). The only thing added is observation: train_step (the name MindSpeed-LLM's training loop calls) is wrapped
to record, at each step, the losses and gradient norm it returns, status(), and the npu_ext operators dispatched and
the fake CANN's launches during the step.
"""

import itertools
import json
import os
import runpy
import sys
import warnings

import fake_cann_lib  # tests/support is sys.path[0]: this script's folder

warnings.filterwarnings("ignore")

# A tiny GPT at a configuration that reaches our operators: the local transformer (no Transformer Engine), no flash
# attention (the masked softmax runs), GELU (no --swiglu: Megatron's bias-GELU), RoPE, dropout 0.1, gradient clipping,
# AdamW (Megatron's adam with weight decay: MindSpeed's AdamW), bf16, the JIT warm-up on (MindSpeed-LLM's
# set_jit_fusion_options). Mock data (MockGPTDataset) and the NullTokenizer's vocabulary; the first batch repeated
# (main(): the loss leaves ln(vocab) by far within the run).
VOCAB = 4096


def args(steps, fused, tp=1):
    a = ["--use-mcore-models", "--transformer-impl", "local",
         "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "256", "--num-attention-heads", "4",
         "--seq-length", "128", "--max-position-embeddings", "128",
         "--position-embedding-type", "rope",
         "--hidden-dropout", "0.1", "--attention-dropout", "0.1",
         "--micro-batch-size", "4", "--global-batch-size", "4",
         "--train-iters", str(steps), "--lr", "3e-3", "--min-lr", "3e-3", "--lr-decay-style", "constant",
         "--optimizer", "adam", "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--weight-decay", "0.1",
         "--clip-grad", "1.0", "--init-method-std", "0.02", "--seed", "1234",
         "--bf16", "--attention-softmax-in-fp32",
         "--no-gradient-accumulation-fusion",
         "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(VOCAB - 1), "--split", "100,0,0",
         "--log-interval", "1", "--eval-iters", "0", "--eval-interval", "1000000",
         "--tensor-model-parallel-size", str(tp),
         "--distributed-backend", "nccl"]
    if not fused:
        a.append("--no-masked-softmax-fusion")
    return a


def counters():
    """The fake CANN's counters: every aclnn entry point's calls and every acl_op launch by type, as {name: count}."""
    out = {}
    for line in fake_cann_lib.opapi().fake_opapi_dump().decode().splitlines():
        name, _, n = line.rpartition("=")
        if name.startswith("aclnn") and not name.endswith("GetWorkspaceSize"):
            out[name] = int(n)
    for line in fake_cann_lib.runtime().fake_cann_dump().decode().splitlines():
        name, _, n = line.rpartition("=")
        if name.startswith("acl_op "):
            out[name] = int(n)
    return out


def delta(a, b):
    return {k: v - a.get(k, 0) for k, v in b.items() if v != a.get(k, 0)}


def run(mode, steps, tp=1):
    """One run of pretrain_gpt.py in this process (`mode` alone or ours, at tensor-parallel size `tp`): the facts."""
    llm = os.environ["NPU_EXT_MINDSPEED_LLM"]
    script = os.path.join(llm, "pretrain_gpt.py")
    # as `cd MindSpeed-LLM && python pretrain_gpt.py ...` with Megatron-LM's megatron/ beside it: the checkout first
    # on sys.path, then the copy of Megatron-LM whose dataset helpers are compiled, and the argv the adaptor parses
    os.chdir(llm)
    sys.path[:0] = [p for p in (llm, os.environ["NPU_EXT_MINDSPEED_LLM_MEGATRON"]) if p not in sys.path]
    # Megatron runs `make` in its datasets folder at start-up (compile_helpers): the Makefile names the library by
    # python3-config's suffix, which is another Python's where python3-config is not this venv's; with this
    # interpreter's suffix the helpers built by tools/versions.py are up to date, and python3 is the venv's
    os.environ["MAKEFLAGS"] = "LIBEXT=" + os.environ["NPU_EXT_MINDSPEED_LLM_EXT_SUFFIX"]
    if not os.environ["PATH"].startswith(os.path.dirname(sys.executable) + os.pathsep):
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    sys.argv = [script, *args(steps, fused=mode == "ours", tp=tp)]

    import torch  # noqa: F401  (autoloads torch_npu)

    import torch_ext
    import torch_ext.megatron as tm

    assert torch_ext._npu.LOADED, torch_ext._npu.why_not_loaded()
    start = counters()
    from mindspeed_llm import megatron_adaptor  # noqa: F401  (MindSpeed-LLM's and MindSpeed's patches, at import)

    returned = None
    if mode == "ours":
        returned = tm.patch()  # docs/megatron.md: after the adaptor import, before pretrain()

    import mindspeed_llm.training.training as loop

    from helpers import DeviceLog

    log = []
    train_step = loop.train_step

    def observed_train_step(*a, **k):
        before = counters()
        ops = DeviceLog()
        with ops:
            out = train_step(*a, **k)
        torch.npu.synchronize()
        loss_dict, grad_norm = out[0], out[5]
        log.append({"losses": {key: float(v) for key, v in loss_dict.items()},
                    "grad_norm": None if grad_norm is None else float(grad_norm), "skipped": int(out[1]),
                    "status": tm.status(), "ops": sorted(ops.npu_ext()), "launches": delta(before, counters()),
                    "counts": {o: ops.ops.count(o) for o in ops.npu_ext()},
                    "allreduces": ops.ops.count("c10d.allreduce_.default"),
                    "devices": {k: sorted(v) for k, v in ops.devices.items()}})
        return out

    # The fixed repeated batch: the training loop gets an iterator that repeats the first batch of the mock data
    # iterator pretrain() built (the same tokens every step, so the model memorises them and the loss falls far from
    # ln(vocab) within a few steps at a learning rate where both runs stay close; fresh mock batches each step
    # would need a rate at which bf16's rounding differences grow chaotically).
    train = loop.train

    def train_on_a_fixed_batch(forward_step_func, model, optimizer, scheduler, train_iterator, *a, **k):
        if train_iterator is not None:  # (None on the tensor-parallel ranks but the first: get_batch broadcasts)
            train_iterator = itertools.repeat(next(train_iterator))
        return train(forward_step_func, model, optimizer, scheduler, train_iterator, *a, **k)

    loop.train_step, loop.train = observed_train_step, train_on_a_fixed_batch
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        loop.train_step, loop.train = train_step, train
    from megatron.core import package_info, parallel_state
    from megatron.training import get_args

    return {"mode": mode, "returned": returned, "steps": log, "launches_total": delta(start, counters()),
            "megatron": package_info.__version__,
            "tp": get_args().tensor_model_parallel_size, "masked_softmax_fusion": get_args().masked_softmax_fusion,
            "bias_gelu_fusion": get_args().bias_gelu_fusion, "swiglu": get_args().swiglu,
            "use_flash_attn": getattr(get_args(), "use_flash_attn", None),
            "tp_rank": parallel_state.get_tensor_model_parallel_rank(),
            "device": str(torch.empty(0, device="npu").device),
            "rank": torch.distributed.get_rank() if torch.distributed.is_initialized() else 0}


def reset():
    """Megatron's global state back to before pretrain() (its arguments, timers, micro-batch calculator, rerun state
    machine, parallel groups), for another run in the same process; the process group stays (Megatron's initialize keeps one already
    there), and so do the adaptors' patches."""
    from megatron.core import num_microbatches_calculator, parallel_state, rerun_state_machine
    from megatron.training import global_vars

    global_vars.unset_global_variables()
    rerun_state_machine.destroy_rerun_state_machine()
    num_microbatches_calculator.destroy_num_microbatches_calculator()
    parallel_state.destroy_model_parallel()


def main():
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 8
    if sys.argv[1] in ("alone", "ours"):  # world size 1; the caller set RANK, WORLD_SIZE, MASTER_PORT
        print("RESULT " + json.dumps(run(sys.argv[1], steps)), flush=True)
        return
    # a rank of runner.ranks(): RANK WORLD PORT OUT MODES; TP = WORLD, this rank on npu:<rank> (Megatron's
    # initialize sets the device from LOCAL_RANK, as under torchrun)
    rank, world, port, out, modes = sys.argv[1:6]
    os.environ.update(RANK=rank, LOCAL_RANK=rank, WORLD_SIZE=world, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                      CUDA_DEVICE_MAX_CONNECTIONS="1")
    result = {}
    for mode in modes.split(","):
        result[mode] = run(mode, steps, tp=int(world))
        reset()

    with open(f"{out}.{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
