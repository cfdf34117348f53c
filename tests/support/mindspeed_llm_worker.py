"""One run of MindSpeed-LLM's pretrain_gpt.py for tests/integrations/test_mindspeed_llm.py, in a process of its own
(MindSpeed-LLM's adaptor patches the whole process at import, and parses sys.argv then). Runs in the MindSpeed pair's
venv that carries MindSpeed-LLM (tools/versions.py mindspeed: the real torch_npu on the fake CANN; the
NPU_EXT_MINDSPEED_LLM* variables name its checkout and the copy of Megatron-LM with the dataset helpers compiled).
Prints one JSON line (``RESULT {...}``) of facts the test asserts on; asserts nothing itself.

  python tests/support/mindspeed_llm_worker.py alone|ours [--steps N]

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


def args(steps, fused):
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
         "--tensor-model-parallel-size", "1",
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


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 8
    llm = os.environ["NPU_EXT_MINDSPEED_LLM"]
    script = os.path.join(llm, "pretrain_gpt.py")
    # as `cd MindSpeed-LLM && python pretrain_gpt.py ...` with Megatron-LM's megatron/ beside it: the checkout first
    # on sys.path, then the copy of Megatron-LM whose dataset helpers are compiled, and the argv the adaptor parses
    os.chdir(llm)
    sys.path[:0] = [llm, os.environ["NPU_EXT_MINDSPEED_LLM_MEGATRON"]]
    # Megatron runs `make` in its datasets folder at start-up (compile_helpers): the Makefile names the library by
    # python3-config's suffix, which is another Python's where python3-config is not this venv's; with this
    # interpreter's suffix the helpers built by tools/versions.py are up to date, and python3 is the venv's
    os.environ["MAKEFLAGS"] = "LIBEXT=" + os.environ["NPU_EXT_MINDSPEED_LLM_EXT_SUFFIX"]
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    sys.argv = [script, *args(steps, fused=mode == "ours")]

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

    from mindspeed_worker import OpLog

    log = []
    train_step = loop.train_step

    def observed_train_step(*a, **k):
        before = counters()
        ops = OpLog()
        with ops:
            out = train_step(*a, **k)
        torch.npu.synchronize()
        loss_dict, grad_norm = out[0], out[5]
        log.append({"losses": {key: float(v) for key, v in loss_dict.items()},
                    "grad_norm": None if grad_norm is None else float(grad_norm), "skipped": int(out[1]),
                    "status": tm.status(), "ops": sorted(ops.ops), "launches": delta(before, counters())})
        return out

    # The fixed repeated batch: the training loop gets an iterator that repeats the first batch of the mock data
    # iterator pretrain() built (the same tokens every step, so the model memorises them and the loss falls far from
    # ln(vocab) within a few steps at a learning rate where both runs stay close; fresh mock batches each step
    # would need a rate at which bf16's rounding differences grow chaotically).
    train = loop.train

    def train_on_a_fixed_batch(forward_step_func, model, optimizer, scheduler, train_iterator, *a, **k):
        first = next(train_iterator)
        return train(forward_step_func, model, optimizer, scheduler, itertools.repeat(first), *a, **k)

    loop.train_step, loop.train = observed_train_step, train_on_a_fixed_batch
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        loop.train_step, loop.train = train_step, train
    from megatron.core import package_info
    from megatron.training import get_args

    result = {"mode": mode, "returned": returned, "steps": log, "launches_total": delta(start, counters()),
              "megatron": package_info.__version__,
              "tp": get_args().tensor_model_parallel_size, "masked_softmax_fusion": get_args().masked_softmax_fusion,
              "bias_gelu_fusion": get_args().bias_gelu_fusion, "swiglu": get_args().swiglu,
              "use_flash_attn": getattr(get_args(), "use_flash_attn", None),
              "rank": torch.distributed.get_rank() if torch.distributed.is_initialized() else 0}
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
