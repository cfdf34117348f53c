"""One rank of tests/integrations/test_megatron_tp.py: examples/megatron_gpt.py's GPT with tensor parallelism over gloo.

    python tests/support/megatron_tp_worker.py RANK WORLD PORT STEPS OUT

Joins a WORLD-process gloo group on 127.0.0.1:PORT, sets up Megatron's model-parallel state with TP = WORLD
(examples/megatron_gpt.py's cpu_megatron), trains the example's GPT STEPS steps as Megatron runs it on the CPU
(fusion off), then again through torch_ext.megatron.patch() (fusion on), and writes OUT.RANK.json: both loss
curves, the operators each run dispatched (helpers.OpLog) counted by name, and the TP size
and rank Megatron saw. The test compares the files of the ranks.
"""

import collections
import datetime
import json
import sys
import warnings

import torch
import torch.distributed as dist

import paths
import torch_ext.megatron as tm
from helpers import OpLog

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # megatron-core's notes about Transformer Engine, Apex, deprecations
    megatron_gpt = paths.example("megatron_gpt")


def counted(log):
    """How often each operator ran: the npu_ext ops and the c10d collectives (the TP communication)."""
    return dict(collections.Counter(o for o in log.ops if o.startswith(("npu_ext.", "c10d."))))


def run(rank, world, port, steps):
    from megatron.core import parallel_state

    torch.set_num_threads(1)  # one core per rank
    # a rank that dies leaves the other waiting in a collective: a short timeout instead of gloo's 30 minutes
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        # Megatron's jit_fuser (torch.compile) eagerly, as in tests/integrations/test_megatron.py and the example
        with megatron_gpt.cpu_megatron(tp=world), torch.compiler.set_stance("force_eager"):
            seen = {"tp": parallel_state.get_tensor_model_parallel_world_size(),
                    "tp_rank": parallel_state.get_tensor_model_parallel_rank()}
            base_log, ours_log = OpLog(), OpLog()
            with base_log:
                base = megatron_gpt.train_gpt(steps, fused=False, tp=world)
            seen["patched"] = tm.patch()
            try:
                with ours_log:
                    ours = megatron_gpt.train_gpt(steps, fused=True, tp=world)
            finally:
                tm.unpatch()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return dict(seen, base=base, ours=ours, base_ops=counted(base_log), ours_ops=counted(ours_log))


def main(argv):
    rank, world, port, steps, out = int(argv[0]), int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    warnings.filterwarnings("ignore")
    result = run(rank, world, port, steps)
    with open(f"{out}.{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
