"""Test-only helpers: expecttest across devices, bit views, 1-vs-2-thread runs, Python frame tracing. Inputs,
samples, oracles and tolerances are torch_ext.testing's."""

import collections

import expecttest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_ext.testing.opinfo import zeros  # noqa: F401  (the families' error cases use the same)




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


class OpLog(TorchDispatchMode):
    """Records every operator that runs (npu_ext ops included), forward and backward."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    def npu_ext(self):
        return {o for o in self.ops if o.startswith("npu_ext.")}


def own_stdout(text):
    """A subprocess's stdout without what others print into it: torch_npu's CANN check as torch autoloads it
    ("Warning: ASCEND_HOME_PATH environment variable is not set." ("Warning : ..." before 2.14) where CANN's
    set_env.sh was not sourced, as under the fake CANN of the release stages, tools/versions.py), and the gloo of
    torch 2.9's connection lines ("[Gloo] Rank 0 is connected to 0 peer ranks. ...")."""
    import re

    others = r"Warning ?: (ASCEND_HOME_PATH |CANN package version )|\[Gloo\] Rank \d+ is connected"
    return "".join(line for line in text.splitlines(keepends=True) if not re.match(others, line))


class DeviceLog(OpLog):
    """OpLog that also records, per npu_ext operator, the devices of the tensors it took and returned."""

    def __init__(self):
        super().__init__()
        self.devices = collections.defaultdict(set)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        name = str(func)
        if name.startswith("npu_ext."):
            for t in torch.utils._pytree.tree_leaves((args, kwargs, out)):
                if isinstance(t, torch.Tensor):
                    self.devices[name].add(str(t.device))
        return out
