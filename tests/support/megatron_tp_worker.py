"""One rank of tests/integrations/test_megatron_tp.py (cpu) and tests/ranks/test_megatron_tp_npu.py (npu):
examples/megatron_gpt.py's GPT with tensor parallelism.

    python tests/support/megatron_tp_worker.py RANK WORLD PORT STEPS OUT [cpu|npu]

cpu (the default): joins a WORLD-process gloo group on 127.0.0.1:PORT, sets up Megatron's model-parallel state with
TP = WORLD (examples/megatron_gpt.py's cpu_megatron), trains the example's GPT STEPS steps as Megatron runs it on
the CPU (fusion off), then again through torch_ext.megatron.patch() (fusion on), and writes OUT.RANK.json: both loss
curves ("base", "ours"), the operators each run dispatched (helpers.OpLog) counted by name, and the TP size and rank
Megatron saw.

npu: the rank on its own device (torch.npu.set_device(RANK)), the group with both backends (cpu:gloo,npu:hccl), and
two trainings in it: the CPU one of the cpu mode unpatched ("base": Megatron's own, over gloo: the reference), then
the patched one on the npu device ("ours", over HCCL); besides the above, the file has the device the npu run's
parameters were on, the devices each npu_ext op saw, and torch_ext.megatron.status() before patch(), after it and
after unpatch(). The test compares the files of the ranks.
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
from helpers import DeviceLog, OpLog

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # megatron-core's notes about Transformer Engine, Apex, deprecations
    megatron_gpt = paths.example("megatron_gpt")


def counted(log):
    """How often each operator ran: the npu_ext ops and the c10d collectives (the TP communication)."""
    return dict(collections.Counter(o for o in log.ops if o.startswith(("npu_ext.", "c10d."))))


def run_npu(rank, world, port, steps):
    """The npu mode (the module's docstring)."""
    import torch_npu  # noqa: F401  (the npu device and the hccl backend)
    from megatron.core import parallel_state

    torch.set_num_threads(1)  # one core per rank
    torch.npu.set_device(rank)
    dist.init_process_group("cpu:gloo,npu:hccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=300))
    seen = {}
    try:
        with torch.compiler.set_stance("force_eager"):
            # the reference: Megatron's own path on the CPU, over gloo (as in the cpu mode)
            with megatron_gpt.cpu_megatron(tp=world):
                base_log = OpLog()
                with base_log:
                    base = megatron_gpt.train_gpt(steps, fused=False, tp=world)
            with megatron_gpt.cpu_megatron(tp=world, device="npu"):
                seen.update(tp=parallel_state.get_tensor_model_parallel_world_size(),
                            tp_rank=parallel_state.get_tensor_model_parallel_rank(),
                            device=str(torch.empty(0, device="npu").device))
                seen["status"] = {"before": tm.status()}
                seen["patched"] = tm.patch()
                seen["status"]["patched"] = tm.status()
                ours_log = DeviceLog()
                try:
                    with ours_log:
                        ours = megatron_gpt.train_gpt(steps, fused=True, tp=world, device="npu")
                finally:
                    tm.unpatch()
                seen["status"]["unpatched"] = tm.status()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return dict(seen, base=base, ours=ours, base_ops=counted(base_log), ours_ops=counted(ours_log),
                ours_devices={k: sorted(v) for k, v in ours_log.devices.items()})


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
    device = argv[5] if len(argv) > 5 else "cpu"
    warnings.filterwarnings("ignore")
    result = (run_npu if device == "npu" else run)(rank, world, port, steps)
    with open(f"{out}.{rank}.json", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
