"""The cases of tests/ranks: every torch.distributed operation of torch_npu's hccl backend, in every dtype it accepts,
on rank-seeded inputs, each checked by the rank that ran it against a float64 closed form of all ranks' inputs (every
rank can make every other rank's input: it is a function of the rank). Bitwise where the result is exact (small
integers, sums of multiples of 1/8, max / min, data movement), within the dtype's rounding elsewhere.

A case is a function (rank, world, dtype) -> [(name, error or None)]; ranks_worker.py runs them on the npu device,
each rank on its own (npu:<rank>, DEVICE below): every checked output must be on it."""

import torch
import torch.distributed as dist

N = 37        # elements per rank: not a multiple of 512 bytes in any dtype (a list all_gather pads it)
BIG = 100_003  # float32: about 400 KB a rank, more than one staging slot of the fake (256 KiB): chunked

# torch_npu's checkSupportedDataType: the reductions' dtypes (bool and uint8 all_reduce go through int32)
REDUCE = [torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32]
FLOAT = [torch.float16, torch.bfloat16, torch.float32]
# all_gather, broadcast, all_to_all, scatter, gather, send / receive: any dtype HCCL knows
MOVE = REDUCE + [torch.uint8, torch.bool, torch.float64]
# the rest of torch_npu's HCCL dtypes: only through operations that touch no aclnn operator besides HCCL (the fake's
# aclnn table, opapi/aten_dtypes.h, has no copy, cat or pad in them)
WIDE = MOVE + [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2]


def values(rank, n, dtype, salt=0, small=False):
    """Rank `rank`'s input: integers in [-4, 4] ([-2, 2] with `small`, for products; [0, 4] unsigned; 0 / 1 for
    bool), as float64, exactly representable in `dtype`; sums of `world` of them are exact in every dtype."""
    i = torch.arange(n, dtype=torch.float64)
    v = torch.remainder(i * 7 + rank * 13 + salt * 5, 5 if small else 9) - (2 if small else 4)
    if dtype == torch.bool:
        return torch.remainder(i + rank + salt, 3) == 0
    if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        return v.abs()
    return v


def real(rank, n, dtype, salt=0):
    """Rank `rank`'s input in the rounding cases: normal values rounded to `dtype`, as float64."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    return torch.randn(n, generator=g, dtype=torch.float64).to(dtype).double()


DEVICE = None  # the rank's device (ranks_worker.py sets it): where every checked output must be


def on_device(out):
    """None when `out` is on the rank's device, else a message (a tensor of another device: the fake's HCCL or
    runtime assuming device 0)."""
    return None if out.device == DEVICE else f"on {out.device}, not on this rank's {DEVICE}"


def npu(v, dtype):
    return v.to(dtype).npu()


def same(out, expected, dtype):
    """None when `out` (npu, on the rank's device) has exactly the bits of `expected` (float64, exact in dtype), else a
    message."""
    if on_device(out):
        return on_device(out)
    got, want = out.cpu(), expected.to(dtype)
    if got.dtype != dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype} {tuple(got.shape)} != {dtype} {tuple(want.shape)}"
    if dtype == torch.bool:
        ok = torch.equal(got, want)
    else:
        ok = torch.equal(got.view(torch.uint8), want.contiguous().view(torch.uint8))
    if ok:
        return None
    bad = (got.double() != want.double()).nonzero().flatten()[:4].tolist()
    return f"differs at {bad}: got {[got[i].item() for i in bad]} want {[want[i].item() for i in bad]}"


def close(out, expected, magnitude, dtype, world):
    """None when `out` is `expected` (float64) rounded to dtype, give or take the rounding of `world` additions in
    float32 (the fake's accumulation; float32 itself: in float32): half an ulp of the result for 16-bit floats; on
    the rank's device."""
    if on_device(out):
        return on_device(out)
    f32 = torch.finfo(torch.float32).eps
    err = (out.cpu().double() - expected).abs()
    if dtype == torch.float32:
        bound = world * f32 * magnitude
    else:
        bound = torch.finfo(dtype).eps / 2 * expected.abs() * (1 + 2 * world * f32) + world * f32 * magnitude
    bound = bound + torch.finfo(dtype).tiny
    if bool((err <= bound).all()):
        return None
    k = int((err - bound).argmax())
    return f"at {k}: got {out.cpu()[k].item()} want {expected[k].item()} (error {err[k].item():.3g}, bound " \
           f"{bound[k].item():.3g})"


def fold(values_by_rank, op):
    """The float64 reduction over ranks (the closed form)."""
    s = torch.stack(values_by_rank)
    if op in ("sum", "avg"):
        r = s.sum(0)
        return r / len(values_by_rank) if op == "avg" else r
    if op == "product":
        return s.prod(0)
    return s.max(0).values if op == "max" else s.min(0).values


OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
       "product": dist.ReduceOp.PRODUCT, "avg": dist.ReduceOp.AVG}


def reduce_ops(dtype):
    return ["sum", "max", "min", "product"] + (["avg"] if dtype.is_floating_point else [])


def bool_fold(vals, op):  # bool: SUM is MAX (or), PRODUCT and MIN are and
    s = torch.stack(vals)
    return s.any(0) if op in ("sum", "max") else s.all(0)


def all_reduce(rank, world, dtype):
    out = []
    for op in reduce_ops(dtype) if dtype != torch.bool else ["sum", "max", "min", "product"]:
        small = op == "product"
        vals = [values(r, N, dtype, 1, small) for r in range(world)]
        t = npu(vals[rank], dtype)
        dist.all_reduce(t, op=OPS[op])
        want = bool_fold(vals, op) if dtype == torch.bool else fold(vals, op)
        out.append((f"all_reduce {op}", same(t, want, dtype)))
    return out


def all_reduce_rounding(rank, world, dtype):
    """SUM of normal values: within the dtype's rounding; float32 also bitwise the rank-order sum in float32 (the
    same bits on every rank, whatever its position)."""
    vals = [real(r, N, dtype, 2) for r in range(world)]
    t = npu(vals[rank], dtype)
    dist.all_reduce(t)
    res = [("all_reduce sum rounding", close(t, fold(vals, "sum"), torch.stack(vals).abs().sum(0), dtype, world))]
    if dtype == torch.float32:
        acc = vals[0].float()
        for v in vals[1:]:
            acc = acc + v.float()
        res.append(("all_reduce sum in rank order", same(t, acc.double(), dtype)))
    return res


def all_reduce_big(rank, world, dtype):
    vals = [values(r, BIG, dtype, 3) for r in range(world)]
    t = npu(vals[rank], dtype)
    dist.all_reduce(t)
    return [("all_reduce big", same(t, fold(vals, "sum"), dtype))]


def reduce(rank, world, dtype):
    out = []
    for dst in range(world):  # every rank the root once
        vals = [values(r, N, dtype, 4 + dst) for r in range(world)]
        t = npu(vals[rank], dtype)
        dist.reduce(t, dst=dst)
        if rank == dst:
            out.append((f"reduce to {dst}", same(t, fold(vals, "sum"), dtype)))
    return out


def broadcast(rank, world, dtype):
    out = []
    for src, n in ((world - 1, N), (0, BIG if dtype == torch.float32 else N)):
        t = npu(values(rank, n, dtype, 6), dtype)
        dist.broadcast(t, src=src)
        out.append((f"broadcast from {src} n={n}", same(t, values(src, n, dtype, 6), dtype)))
    return out


def all_gather(rank, world, dtype):
    out = []
    for n in (N, BIG) if dtype == torch.float32 else (N,):
        vals = [values(r, n, dtype, 7) for r in range(world)]
        outs = [torch.empty(n, dtype=dtype).npu() for _ in range(world)]
        dist.all_gather(outs, npu(vals[rank], dtype))
        out += [(f"all_gather list n={n} [{k}]", same(outs[k], vals[k], dtype)) for k in range(world)]
        t = torch.empty(world * n, dtype=dtype).npu()
        dist.all_gather_into_tensor(t, npu(vals[rank], dtype))
        out.append((f"all_gather_into_tensor n={n}", same(t, torch.cat(vals), dtype)))
    vals = [values(r, N, dtype, 8) for r in range(world)]
    t = npu(torch.zeros(world * N, dtype=torch.float64), dtype)
    t[rank * N:(rank + 1) * N] = npu(vals[rank], dtype)
    dist.all_gather_into_tensor(t, t[rank * N:(rank + 1) * N])
    out.append(("all_gather_into_tensor in place", same(t, torch.cat(vals), dtype)))
    return out


def reduce_scatter(rank, world, dtype):
    out = []
    for op in reduce_ops(dtype):
        small = op == "product"
        blocks = [[values(r, N, dtype, 10 + j, small) for j in range(world)] for r in range(world)]
        t = torch.empty(N, dtype=dtype).npu()
        dist.reduce_scatter(t, [npu(b, dtype) for b in blocks[rank]], op=OPS[op])
        want = fold([blocks[r][rank] for r in range(world)], op)
        out.append((f"reduce_scatter list {op}", same(t, want, dtype)))
        t = torch.empty(N, dtype=dtype).npu()
        dist.reduce_scatter_tensor(t, npu(torch.cat(blocks[rank]), dtype), op=OPS[op])
        out.append((f"reduce_scatter_tensor {op}", same(t, want, dtype)))
    blocks = [[values(r, N, dtype, 20 + j) for j in range(world)] for r in range(world)]
    t = npu(torch.cat(blocks[rank]), dtype)
    dist.reduce_scatter_tensor(t[rank * N:(rank + 1) * N], t)
    want = fold([blocks[r][rank] for r in range(world)], "sum")
    out.append(("reduce_scatter_tensor in place", same(t[rank * N:(rank + 1) * N], want, dtype)))
    if dtype == torch.float32:
        blocks = [[values(r, BIG, dtype, 30 + j) for j in range(world)] for r in range(world)]
        t = torch.empty(BIG, dtype=dtype).npu()
        dist.reduce_scatter_tensor(t, npu(torch.cat(blocks[rank]), dtype))
        out.append(("reduce_scatter_tensor big", same(t, fold([blocks[r][rank] for r in range(world)], "sum"), dtype)))
    return out


def split(src, dst):
    """How many elements rank src sends rank dst in the uneven all_to_all."""
    return (src + 2 * dst) % 3 + 1


def all_to_all(rank, world, dtype):
    out = []
    for n in (N, BIG // world) if dtype == torch.float32 else (N,):
        blocks = [[values(r, n, dtype, 40 + j) for j in range(world)] for r in range(world)]
        t = torch.empty(world * n, dtype=dtype).npu()
        dist.all_to_all_single(t, npu(torch.cat(blocks[rank]), dtype))
        out.append((f"all_to_all_single n={n}", same(t, torch.cat([blocks[k][rank] for k in range(world)]), dtype)))
    blocks = [[values(r, split(r, j), dtype, 50 + j) for j in range(world)] for r in range(world)]
    t = torch.empty(sum(split(k, rank) for k in range(world)), dtype=dtype).npu()
    dist.all_to_all_single(t, npu(torch.cat(blocks[rank]), dtype), [split(k, rank) for k in range(world)],
                           [split(rank, j) for j in range(world)])
    out.append(("all_to_all_single uneven", same(t, torch.cat([blocks[k][rank] for k in range(world)]), dtype)))
    outs = [torch.empty(split(k, rank), dtype=dtype).npu() for k in range(world)]
    dist.all_to_all(outs, [npu(b, dtype) for b in blocks[rank]])
    out += [(f"all_to_all list [{k}]", same(outs[k], blocks[k][rank], dtype)) for k in range(world)]
    return out


def scatter_gather(rank, world, dtype):
    out = []
    src = world - 1
    t = torch.empty(N, dtype=dtype).npu()
    dist.scatter(t, [npu(values(src, N, dtype, 60 + j), dtype) for j in range(world)] if rank == src else None,
                 src=src)
    out.append((f"scatter from {src}", same(t, values(src, N, dtype, 60 + rank), dtype)))
    gathered = [torch.empty(N, dtype=dtype).npu() for _ in range(world)] if rank == 0 else None
    dist.gather(npu(values(rank, N, dtype, 70), dtype), gathered, dst=0)
    if rank == 0:
        out += [(f"gather to 0 [{k}]", same(gathered[k], values(k, N, dtype, 70), dtype)) for k in range(world)]
    return out


def send_recv(rank, world, dtype):
    """A ring: every rank sends its input to the next and receives the previous one's (even ranks send first)."""
    out = []
    for n in (N, BIG) if dtype == torch.float32 else (N,):
        nxt, prev = (rank + 1) % world, (rank - 1) % world
        mine, got = npu(values(rank, n, dtype, 80), dtype), torch.empty(n, dtype=dtype).npu()
        if rank % 2 == 0:
            dist.send(mine, nxt)
            dist.recv(got, prev)
        else:
            dist.recv(got, prev)
            dist.send(mine, nxt)
        out.append((f"send/recv ring n={n}", same(got, values(prev, n, dtype, 80), dtype)))
        # both directions at once: a batch of two sends and two receives (HcclBatchSendRecv)
        ops, left, right = [], torch.empty(n, dtype=dtype).npu(), torch.empty(n, dtype=dtype).npu()
        ops.append(dist.P2POp(dist.isend, npu(values(rank, n, dtype, 81), dtype), nxt))
        ops.append(dist.P2POp(dist.isend, npu(values(rank, n, dtype, 82), dtype), prev))
        ops.append(dist.P2POp(dist.irecv, left, prev))
        ops.append(dist.P2POp(dist.irecv, right, nxt))
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        out.append((f"batch_isend_irecv from prev n={n}", same(left, values(prev, n, dtype, 81), dtype)))
        out.append((f"batch_isend_irecv from next n={n}", same(right, values(nxt, n, dtype, 82), dtype)))
    return out


_groups = {}


def subgroups(rank, world, dtype):
    """all_reduce and all_gather within groups of the even and of the odd ranks (4 ranks), of both ranks in a group of
    their own (2): each a communicator of its own. Every rank makes every group, once."""
    if not _groups:
        parts = [[r for r in range(world) if r % 2 == p] for p in (0, 1)] if world >= 4 else [list(range(world))]
        _groups.update({tuple(g): dist.new_group(g) for g in parts})
    mine, group = next((list(g), h) for g, h in _groups.items() if rank in g)
    vals = [values(r, N, dtype, 90) for r in range(world)]
    t = npu(vals[rank], dtype)
    dist.all_reduce(t, group=group)
    out = [(f"subgroup {mine} all_reduce", same(t, fold([vals[r] for r in mine], "sum"), dtype))]
    g = torch.empty(len(mine) * N, dtype=dtype).npu()
    dist.all_gather_into_tensor(g, npu(vals[rank], dtype), group=group)
    out.append((f"subgroup {mine} all_gather", same(g, torch.cat([vals[r] for r in mine]), dtype)))
    return out


# (case, dtypes)
CASES = [
    (all_reduce, REDUCE + [torch.uint8, torch.bool]),
    (all_reduce_rounding, FLOAT),
    (all_reduce_big, [torch.float32, torch.int8]),
    (reduce, REDUCE),
    (broadcast, WIDE),
    (all_gather, MOVE),
    (reduce_scatter, REDUCE),
    (all_to_all, MOVE),
    (scatter_gather, MOVE),
    (send_recv, WIDE),
    (subgroups, REDUCE),
]
