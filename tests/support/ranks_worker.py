"""One rank of tests/ranks: torch.distributed over torch_npu's hccl backend on the fake CANN's HCCL, each rank on its
own device, npu:<rank> (the test sets NPU_FAKE_DEVICE_COUNT to the number of ranks).

    python ranks_worker.py RANK WORLD PORT cases [CASE ...]   every case of ranks_cases (or those named), each dtype;
                                                              prints one line "RESULT <json>": [[case, dtype,
                                                              check, error or null], ...], then "DEVICES <json>":
                                                              the fake runtime's bytes in use on each device
    python ranks_worker.py RANK WORLD PORT barrier            rank 0 sleeps before the barrier; prints the seconds
                                                              each rank spent in it
    python ranks_worker.py RANK WORLD PORT loop               prints "READY" after a first all_reduce, then
                                                              all_reduces until killed (the killed-rank test)
    python ranks_worker.py RANK WORLD PORT exit               leaves right after init_process_group"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401  (the npu device and the hccl backend)

import fake_cann_lib
import ranks_cases


def init(rank, world, port):
    torch.npu.set_device(rank)  # each rank on its own device, as MindSpeed and torchrun users do (local rank)
    ranks_cases.DEVICE = torch.device("npu", rank)
    dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def run_cases(rank, world, names):
    results = []
    for case, dtypes in ranks_cases.CASES:
        if names and case.__name__ not in names:
            continue
        for dtype in dtypes:
            start = time.monotonic()
            try:
                checks = case(rank, world, dtype)
            except Exception as e:  # noqa: BLE001  (reported, and the test fails on it)
                checks = [("raised", f"{type(e).__name__}: {e}"[:400])]
            torch.npu.synchronize()
            results += [[case.__name__, str(dtype), name, err] for name, err in checks]
            print(f"TIME {case.__name__} {dtype} {time.monotonic() - start:.2f}", file=sys.stderr, flush=True)
    return results


def main(rank, world, port, scenario, *names):
    init(rank, world, port)
    if scenario == "cases":
        results = run_cases(rank, world, set(names))
        print("RESULT " + json.dumps(results), flush=True)
        rt = fake_cann_lib.runtime()
        in_use = [rt.fake_cann_count(b"bytes_in_use device %d" % d) for d in range(torch.npu.device_count())]
        print("DEVICES " + json.dumps({"current": torch.npu.current_device(), "bytes_in_use": in_use}), flush=True)
    elif scenario == "barrier":
        t = torch.ones(1).npu()
        dist.all_reduce(t)  # every rank's communicator is up before the timing
        torch.npu.synchronize()
        if rank == 0:
            time.sleep(1.5)
        start = time.monotonic()
        dist.barrier()
        torch.npu.synchronize()
        print(f"BARRIER {time.monotonic() - start:.3f}", flush=True)
    elif scenario == "exit":  # gone before any communicator exists
        os._exit(0)
    elif scenario == "loop":
        t = torch.ones(4).npu()
        dist.all_reduce(t)
        torch.npu.synchronize()
        print(f"READY {t.cpu().tolist()}", flush=True)
        while True:
            dist.all_reduce(t)
            torch.npu.synchronize()
            time.sleep(0.01)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:])
