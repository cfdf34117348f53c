"""Shared test helpers: input construction in every layout the operators must accept."""

import expecttest
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


def zeros(*shape, dtype=torch.float32, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)


class DeviceErrorTestCase(expecttest.TestCase):
    """expecttest.TestCase whose err(fn) returns the message of the RuntimeError raised by fn(device) on every
    device given (CPU and Meta by default), asserting they agree: the checks are one shared implementation."""

    def err(self, fn, devices=("cpu", "meta")):
        messages = set()
        for device in devices:
            with self.assertRaises(RuntimeError) as ctx:
                fn(device)
            messages.add(str(ctx.exception).split("\n")[0])
        self.assertEqual(len(messages), 1, messages)
        return messages.pop()


def bits(t):
    """The raw bits of a float tensor, for exact comparisons (NaN-safe, -0.0 != 0.0)."""
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def on_1_and_2_threads(fn):
    """fn() computed with 1 and with 2 threads, each result as a tuple of tensors."""
    before = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            torch.set_num_threads(n)
            r = fn()
            results.append(r if isinstance(r, tuple) else (r,))
        return results
    finally:
        torch.set_num_threads(before)


def python_frames(fn, *args):
    """fn(*args) under a Python profiler hook: (its result, the file of every Python frame entered while it
    ran), to prove that a call stays in C++ or takes a given path."""
    import sys

    files = []

    def hook(frame, event, arg):
        if event == "call":
            files.append(frame.f_code.co_filename)

    sys.setprofile(hook)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
    return out, files
