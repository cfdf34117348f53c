"""torch.distributed across processes on the npu device: torch_npu's hccl backend over the fake CANN's HCCL
(tests/fake_cann/hccl, docs/testing.md), 2 and 4 ranks, each a process of tests/support/ranks_worker.py in the
default torch_npu's runtime (make test-ranks), each rank on its own device of the fake (NPU_FAKE_DEVICE_COUNT = the
number of ranks, torch.npu.set_device(rank)).

- Every operation x dtype of ranks_cases, checked by each rank against a float64 closed form of all ranks' inputs:
  bitwise where exact, within the dtype's rounding elsewhere; float32 sums bitwise in rank order. Every checked
  output on npu:<rank>, and the fake runtime's memory accounting shows memory in use on that device only.
  For TASK_QUEUE_ENABLE unset (torch_npu's default), 0, 1 and 2.
- A barrier waits for the last rank.
- A rank killed with SIGKILL ends the others, non-zero, within HCCL_EXEC_TIMEOUT + 10 s, naming HCCL and the peer.
- /dev/shm holds no segment of the fake after any run (killed ones included); one left by a run killed before its
  ranks all attached is swept at the next init.
- PER_STREAM_QUEUE=1 is refused.

The subset for CI: `-k 2ranks-tqdefault` (2 ranks, the default task queue; make test-ranks RANKS_SELECT=...)."""

import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

import fake_cann_lib
import runner

pytestmark = [pytest.mark.subprocess,
              pytest.mark.skipif(fake_cann_lib.runtime() is None,
                                 reason="needs torch_npu on the fake CANN (make test-ranks)")]

PREFIX = "torch_ext_fake_hccl_"  # the fake's segment names (tests/fake_cann/hccl/comm.h)
EXEC_TIMEOUT = 10
MATRIX = [(2, "default")] + [(w, tq) for w in (2, 4) for tq in ("0", "1", "2")]


def segments():
    return {n for n in os.listdir("/dev/shm") if n.startswith(PREFIX)}


@pytest.fixture(autouse=True)
def shm_unchanged():
    """Every test leaves /dev/shm as it found it (no segment of the fake added)."""
    before = segments()
    yield
    assert segments() - before == set(), "fake HCCL segments left in /dev/shm"


_PORT = {}


def start(world, *args, tq="default", ranks=None, **env):
    """Ranks `ranks` (default all) of a run of ranks_worker.py; the ranks of one run share a port (started one
    after the other: the call for the first ranks chooses it)."""
    port = runner.free_port() if not ranks or ranks[0] == 0 else _PORT[world]
    _PORT[world] = port
    # a loaded machine can stall a rank for seconds; a device per rank
    extra = {"HCCL_EXEC_TIMEOUT": "600", "NPU_FAKE_DEVICE_COUNT": str(world), **env}
    base = {k: v for k, v in os.environ.items() if k not in ("TASK_QUEUE_ENABLE", "PER_STREAM_QUEUE")}
    if tq != "default":
        extra["TASK_QUEUE_ENABLE"] = tq
    procs = []
    for r in range(world) if ranks is None else ranks:
        log = tempfile.TemporaryFile()  # a file, not a pipe: a rank blocked on a full pipe would stall its peers
        procs.append(runner.worker("ranks_worker.py", r, world, port, *args, env_extra=extra, base=base, stdout=log,
                                   stderr=subprocess.STDOUT))
        procs[-1].log = log
    return procs


def output(p):
    p.log.seek(0)
    return p.log.read().decode(errors="replace")


def finish(procs, timeout=300, grace=20):
    """The ranks' output once all have exited; the ones still running `grace` s after a rank failed are killed (a
    rank that failed leaves its peers waiting for HCCL_EXEC_TIMEOUT), and every one after `timeout` s."""
    deadline, failed_at = time.monotonic() + timeout, None
    try:
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() > failed_at + grace:
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [output(p) for p in procs]


@pytest.mark.parametrize("world,tq", MATRIX, ids=[f"{w}ranks-tq{tq}" for w, tq in MATRIX])
def test_every_operation_and_dtype(world, tq):
    logs = finish(start(world, "cases", tq=tq))
    import ranks_cases

    expected_cases = {(c.__name__, str(d)) for c, dtypes in ranks_cases.CASES for d in dtypes}
    for rank, log in enumerate(logs):
        lines = [line for line in log.splitlines() if line.startswith("RESULT ")]
        assert lines, f"rank {rank} reported nothing:\n{log[-4000:]}"
        results = json.loads(lines[0][len("RESULT "):])
        assert {(c, d) for c, d, _, _ in results} == expected_cases, f"rank {rank}: cases missing"
        bad = [r for r in results if r[3] is not None]
        assert not bad, f"rank {rank} of {world}: {len(bad)} of {len(results)} checks failed:\n" + \
            "\n".join(map(str, bad[:20]))
        assert len(results) > 250
        # the rank worked on its own device, and only there (the fake's per-device accounting)
        devices = [line for line in log.splitlines() if line.startswith("DEVICES ")]
        assert devices, f"rank {rank} reported no devices:\n{log[-4000:]}"
        seen = json.loads(devices[0][len("DEVICES "):])
        assert seen["current"] == rank and len(seen["bytes_in_use"]) == world, seen
        assert [d for d, n in enumerate(seen["bytes_in_use"]) if n > 0] == [rank], seen


SUBSET = pytest.mark.parametrize("world,tq", [(2, "default")], ids=["2ranks-tqdefault"])  # the id CI selects


@pytest.mark.parametrize("world,tq", [(2, "default"), (2, "0")], ids=["2ranks-tqdefault", "2ranks-tq0"])
def test_barrier_waits_for_the_last_rank(world, tq):
    logs = finish(start(2, "barrier", tq=tq))
    waited = [float(line.split()[1]) for log in logs for line in log.splitlines() if line.startswith("BARRIER ")]
    assert len(waited) == 2, "\n".join(logs)
    assert waited[1] > 1.0, f"rank 1 left the barrier after {waited[1]} s, before rank 0 (asleep 1.5 s) reached it"


KILL = [(2, "default"), (2, "0"), (2, "1"), (2, "2"), (4, "default")]


@pytest.mark.parametrize("world,tq", KILL, ids=[f"{w}ranks-tq{tq}" for w, tq in KILL])
def test_killed_rank_ends_the_others(world, tq):
    procs = start(world, "loop", tq=tq, HCCL_EXEC_TIMEOUT=str(EXEC_TIMEOUT))
    victim = 1  # not rank 0, which holds the c10d store (its death would end the others through the store)
    try:
        deadline = time.monotonic() + 300
        while not all("READY" in output(p) for p in procs):  # every rank has done one all_reduce
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
                "\n".join(map(output, procs))[-4000:]
            time.sleep(0.2)
        for p in procs:
            assert f"READY [{float(world)}" in output(p), output(p)[-2000:]
        procs[victim].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        rest = [p for r, p in enumerate(procs) if r != victim]
        logs = finish(rest, timeout=EXEC_TIMEOUT + 10)
        elapsed = time.monotonic() - killed
    finally:
        finish(procs, timeout=1)
    assert elapsed < EXEC_TIMEOUT + 10
    for p, log in zip(rest, logs):
        assert p.returncode != 0, log[-3000:]
        assert "HCCL" in log and f"rank {victim} (pid {procs[victim].pid}" in log, log[-3000:]


@SUBSET
def test_segment_of_a_killed_init_is_swept(world, tq):
    """Rank 1 leaves before the communicator exists, rank 0 waits in HCCL's init with the segment made, and is
    killed there: its segment stays (no rank unlinked it) until the next init anywhere sweeps it."""
    before = segments()
    rank0 = start(world, "loop", tq=tq, ranks=[0], HCCL_CONNECT_TIMEOUT="120")[0]
    rank1 = start(world, "exit", tq=tq, ranks=[1])[0]
    try:
        finish([rank1], timeout=120)
        deadline = time.monotonic() + 120
        while not segments() - before and time.monotonic() < deadline and rank0.poll() is None:
            time.sleep(0.2)
        left = segments() - before
        assert left, "rank 0 made no segment"
        rank0.send_signal(signal.SIGKILL)
        rank0.wait()
        assert segments() - before == left  # nobody unlinked it
    finally:
        finish([rank0, rank1], timeout=1)
    logs = finish(start(world, "barrier", tq=tq))  # the next init sweeps it
    assert sum("BARRIER" in log for log in logs) == 2, "\n".join(logs)
    assert not (segments() & left)


@SUBSET
def test_per_stream_queue_is_refused(world, tq):
    procs = start(world, "barrier", tq=tq, PER_STREAM_QUEUE="1")
    logs = finish(procs, timeout=120)
    for p, log in zip(procs, logs):
        assert p.returncode != 0 and "BARRIER" not in log, log[-3000:]
        assert "PER_STREAM_QUEUE=1 is not supported by the fake CANN" in log, log[-3000:]
