"""Input construction in every layout the operators must accept (contiguous, transposed, sliced with a storage
offset, expanded), for the sample table and the tests."""

import torch

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def make(shape, dtype, low=-3.0, high=3.0, layout="contiguous", generator=None):
    """A tensor of `shape` and `dtype` with values in [low, high), laid out as asked:
    contiguous, transposed (last two dims), sliced (every other element of a larger buffer, with a storage
    offset), or expanded (a zero-stride broadcast of a smaller tensor)."""
    def rand(s):
        return (torch.rand(s, dtype=torch.float64, generator=generator) * (high - low) + low).to(dtype)

    shape = list(shape)
    if layout == "contiguous" or len(shape) == 0:
        return rand(shape)
    if layout == "transposed":
        if len(shape) < 2:
            return rand(shape)
        t = rand(shape[:-2] + [shape[-1], shape[-2]])
        return t.transpose(-1, -2)
    if layout == "sliced":
        big = rand([1] + shape[:-1] + [2 * shape[-1] + 1])
        return big[0, ..., 1::2]
    if layout == "expanded":
        return rand([1] + shape[1:]).expand(shape)
    raise ValueError(layout)


LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def relayout(t, layout):
    """The values of `t` in the given layout (see make); "expanded" needs t to be constant along dim 0."""
    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed":
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "sliced":
        buf = torch.empty(list(t.shape[:-1]) + [2 * t.shape[-1] + 1], dtype=t.dtype)
        buf[..., 1::2] = t
        return buf[..., 1::2]
    if layout == "expanded":
        assert torch.equal(t, t[:1].expand(t.shape))
        return t[:1].expand(t.shape)
    raise ValueError(layout)
