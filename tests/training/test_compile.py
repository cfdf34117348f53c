"""torch.compile (inductor, CPU, fullgraph=True) forward and backward through every function, dynamic
shapes, and torch.export keeping each op as one node.

Compilation is slow on 2 cores: one compiled loss function per function, small shapes, reused by the tests.
"""

import functools

import pytest
import torch

from torch_ext.testing import samples
import torch_ext
from torch._inductor.utils import run_and_get_code

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

ops = torch.ops.npu_ext


def causal(s1, s2):
    return torch.ones(s1, s2, dtype=torch.bool).triu(1)


# backward op -> (loss of (inputs...), inputs maker of size n, forward op, backward op), from the sample table
# (samples.OPS[op].function and its first variant's function_inputs at size "tiny", resized to n).
def _entry(op):
    info = samples.OPS[op]
    variant = info.variants[0]

    def make(n):
        inputs, kwargs = info.function_inputs(torch.float32, "tiny", variant, samples.generator(n))
        return _resize(op, inputs, kwargs, n)

    def loss(*tensors):
        *inputs, kwargs = tensors
        return info.function(*inputs, **kwargs).pow(2).sum()

    return loss, make, f"npu_ext.{info.forward}", f"npu_ext.{op}"


def _resize(op, inputs, kwargs, n):
    """The tiny inputs with one dimension grown to n (so that several sizes exercise dynamic shapes)."""
    if op == "scaled_masked_softmax_backward":
        x = torch.randn(2, 2, n, n)
        return [x, dict(kwargs, mask=causal(n, n))]
    if op == "grouped_bias_add_grad":
        x, b = inputs
        return [torch.randn(n, x.shape[1]), b, dict(kwargs, group_idx=torch.tensor([1, 1, n]), group_idx_type=0)]
    if op == "prelu_backward":
        x, w = inputs
        return [torch.randn(2, w.numel(), n), w, kwargs]
    x = inputs[0]
    return [torch.rand(n, x.shape[-1]) if op == "logit_grad" else torch.randn(n, x.shape[-1]), kwargs]


FUNCTIONS = {samples.OPS[op].forward: _entry(op) for op in samples.OPS}


@pytest.fixture(autouse=True, scope="module")
def _fresh_compile_caches():
    # A stale on-disk inductor/AOT cache entry (e.g. from a build of the extension with other Meta kernels)
    # could be served instead of compiling: compile for real in these tests.
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        torch._dynamo.reset()
        yield
        torch._dynamo.reset()


@functools.lru_cache(maxsize=None)
def compiled(name, dynamic):
    return torch.compile(FUNCTIONS[name][0], fullgraph=True, backend="inductor", dynamic=dynamic)


def eager_and_compiled(name, n, dynamic=False):
    loss_fn, make, _, _ = FUNCTIONS[name]
    inputs = make(n)
    diff = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    for t in diff:
        t.requires_grad_()
    expected = loss_fn(*inputs)
    expected_grads = torch.autograd.grad(expected, diff)

    def run():
        loss = compiled(name, dynamic)(*inputs)
        return loss, torch.autograd.grad(loss, diff)

    (loss, grads), code = run_and_get_code(run)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    return "\n".join(code)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_compile_forward_backward(name):
    """fullgraph=True (a graph break raises); the generated code calls our forward and backward ops."""
    code = eager_and_compiled(name, 5)
    _, _, fwd, bwd = FUNCTIONS[name]
    assert f"torch.ops.{fwd}.default" in code, code
    assert f"torch.ops.{bwd}.default" in code, code


def test_compile_dynamic_shapes_no_recompile():
    """The Meta kernels are SymInt-aware: one dynamic graph serves several sizes, forward and backward."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def loss_fn(x, m, y, w, z, b, gidx):
        return (torch_ext.scaled_masked_softmax(x, m, 0.5).pow(2).sum() + torch_ext.gelu(y).sum()
                + torch_ext.prelu(y.unsqueeze(0), w).sum() + torch_ext.logit(z, 0.01).sum()
                + torch_ext.grouped_bias_add(y, b, gidx).pow(2).sum())

    counter = CompileCounterWithBackend("inductor")
    cfn = torch.compile(loss_fn, fullgraph=True, dynamic=True, backend=counter)
    for n in (5, 7, 9):
        inputs = [torch.randn(2, 2, n, n + 1, requires_grad=True), causal(n, n + 1),
                  torch.randn(n + 2, 3, requires_grad=True), torch.rand(n + 2, requires_grad=True),
                  torch.rand(n + 3, requires_grad=True), torch.randn(2, 3, requires_grad=True),
                  torch.tensor([1, n + 2])]
        diff = [t for t in inputs if t.requires_grad]
        got = torch.autograd.grad(cfn(*inputs), diff)
        exp = torch.autograd.grad(loss_fn(*inputs), diff)
        for a, b in zip(got, exp):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 1, counter.frame_count


def test_compile_megatron_options():
    """fully_masked="zero" (with a padding mask and without a mask) and the prob-weighted grouped bias add,
    compiled whole (fullgraph), forward and backward equal eager, through the npu_ext ops."""
    pad = torch.zeros(2, 1, 6, 7, dtype=torch.bool)
    pad[1, :, 4:] = True  # fully masked rows
    pad[0, ..., 5:] = True

    def loss_fn(x, b, p):
        s = torch_ext.scaled_masked_softmax(x, pad, 0.5, fully_masked="zero")
        s = s + torch_ext.scaled_masked_softmax(x, None, 0.25, fully_masked="zero")
        h = torch_ext.grouped_bias_add(s.reshape(-1, 7), b, torch.tensor([30, 0, 54]), 1, probs=p)
        return h.pow(2).sum()

    inputs = [torch.randn(2, 7, 6, 7, requires_grad=True), torch.randn(3, 7, requires_grad=True),
              torch.rand(84, 1, requires_grad=True)]
    expected = loss_fn(*inputs)
    expected_grads = torch.autograd.grad(expected, inputs)
    cfn = torch.compile(loss_fn, fullgraph=True, backend="inductor")

    def run():
        loss = cfn(*inputs)
        return loss, torch.autograd.grad(loss, inputs)

    (loss, grads), code = run_and_get_code(run)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    code = "\n".join(code)
    for op in ("scaled_masked_softmax", "scaled_masked_softmax_backward", "grouped_bias_add", "grouped_bias_add_grad"):
        assert f"torch.ops.npu_ext.{op}.default" in code, op


def test_compiled_training_block():
    """A small block using all five functions, compiled whole, trains like eager."""
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    a = torch.full((8,), 0.2, requires_grad=True)
    bias = torch.zeros(2, 8, requires_grad=True)
    gidx = torch.tensor([3, 6])

    def block(x):
        h = torch_ext.prelu(x @ w, a)  # prelu over the (6, 8) rows: 8 channels
        h = torch_ext.gelu(h)
        h = torch_ext.grouped_bias_add(h, bias, gidx)
        att = torch_ext.scaled_masked_softmax(h @ h.t(), causal(6, 6), 0.3)
        return torch_ext.logit(torch.sigmoid(att @ h), 1e-4).square().mean()

    x = torch.randn(6, 8)
    cblock = torch.compile(block, fullgraph=True)
    for fn in (block, cblock):
        loss = fn(x)
        grads = torch.autograd.grad(loss, [w, a, bias])
        if fn is block:
            ref = (loss, grads)
    torch.testing.assert_close(loss, ref[0], rtol=1e-5, atol=1e-6)
    for g, r in zip(grads, ref[1]):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------
class AllOps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(4))
        self.b = torch.nn.Parameter(torch.randn(3, 8))

    def forward(self, x, mask, p, gidx):
        h = torch_ext.gelu(x)
        h = torch_ext.prelu(h, self.w)
        s = torch_ext.scaled_masked_softmax(h, mask, 0.5)
        g = torch_ext.grouped_bias_add(s.reshape(-1, 8), self.b, gidx)
        return g, torch_ext.logit(p, 0.01)


def export_inputs():
    return (torch.randn(2, 4, 6, 8), causal(6, 8), torch.rand(5), torch.tensor([10, 30, 48]))


def test_export_one_node_per_op():
    ep = torch.export.export(AllOps(), export_inputs())
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    for op in ("gelu", "prelu", "scaled_masked_softmax", "grouped_bias_add", "logit"):
        assert targets.count(f"npu_ext.{op}.default") == 1, targets
    assert not any(t.startswith("aten.softmax") or t.startswith("aten.gelu") for t in targets), targets
    # the exported program runs and matches eager
    m = AllOps()
    ep = torch.export.export(m, export_inputs())
    args = export_inputs()
    for a, b in zip(ep.module()(*args), m(*args)):
        torch.testing.assert_close(a, b)


def test_export_dynamic_batch():
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(AllOps(), export_inputs(),
                             dynamic_shapes=({0: batch}, None, None, None))
    # a different batch size runs through the same program (grouped rows must still sum: use 3 groups)
    x = torch.randn(3, 4, 6, 8)
    gidx = torch.tensor([10, 30, 72])
    m = AllOps()
    m.load_state_dict(ep.module().state_dict())
    out = ep.module()(x, causal(6, 8), torch.rand(5), gidx)
    torch.testing.assert_close(out[0], m(x, causal(6, 8), torch.rand(5), gidx)[0])
