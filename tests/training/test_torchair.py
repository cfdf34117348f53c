"""torch_ext.torchair: the decompositions for torchair's GE graph mode, tested on the CPU without torchair.

AOTAutograd (``aot_function``, as torchair's backend calls it) traces each torch_ext function with
``torch_ext.torchair.decompositions()``. Checked: the forward graph holds ATen ops only, all of them in
``torch_ext.torchair.ATEN_OPS`` (the ops torchair converts); the backward graph calls the npu_ext backward op;
values and gradients equal the eager npu_ext ones, and in float64 plain PyTorch's. Without the decompositions
the forward op is in the graph (what torchair could not convert). Also: invalid group_idx values give NaN (not
an error, not a bad read), the checks still run under torch.compile, and npu_backend() against a stand-in
torchair module. Set TORCHAIR_SRC to torchair's source directory (torch_npu/dynamo/torchair) to also check
ATEN_OPS against its converters.
"""

import ast
import math
import os
import sys
import types

import pytest
import torch
from functorch.compile import aot_function, make_boxed_compiler

import torch_ext
import torch_ext.torchair as ta
from torch_ext.testing import samples

# Not under the aarch64 emulation (tools/aarch64/run.sh selects -m 'not arch_independent'): no
# architecture-specific code of the package here, and make test runs it natively.
pytestmark = pytest.mark.arch_independent

ops = torch.ops.npu_ext
f64 = torch.float64
DECOMPS = ta.decompositions()
FORWARD_OPS = tuple(info.forward for info in samples.OPS.values())  # each backward op's forward op


class Traced:
    """fn compiled by aot_function; after a call (and a backward), `graphs` holds the forward and backward
    FX graphs."""

    def __init__(self, fn, decompositions=DECOMPS):
        self.graphs = {}

        def capture(name):
            def compiler(gm, example_inputs):
                self.graphs[name] = gm
                return gm
            return make_boxed_compiler(compiler)

        self.fn = aot_function(fn, fw_compiler=capture("forward"), bw_compiler=capture("backward"),
                               decompositions=decompositions)

    def __call__(self, *args):
        return self.fn(*args)

    def targets(self, name):
        return [str(n.target) for n in self.graphs[name].graph.nodes if n.op == "call_function"]


def assert_graphs(traced, backward_op):
    """The forward graph has no npu_ext op; the backward graph calls `backward_op`; every ATen op is in
    ATEN_OPS."""
    fw = traced.targets("forward")
    assert not [t for t in fw if t.startswith("npu_ext.")], fw
    graphs = [fw]
    if backward_op is not None:
        bw = traced.targets("backward")
        assert f"npu_ext.{backward_op}.default" in bw, bw
        graphs.append(bw)
    for targets in graphs:
        aten = {t for t in targets if t.startswith("aten.")}
        assert aten <= ta.ATEN_OPS, sorted(aten - ta.ATEN_OPS)
        assert {t for t in targets if not t.startswith(("aten.", "npu_ext."))} <= {"<built-in function getitem>"}


def loss_weights(y):
    return torch.randn(y.shape, dtype=f64, generator=samples.generator(1)).to(y.dtype)


def forward_backward(fn, inputs, extra):
    """fn(*inputs, *extra) and the gradients of sum(y * w) with respect to `inputs`."""
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    y = fn(*inputs, *extra)
    grads = torch.autograd.grad((y * loss_weights(y)).sum(), inputs)
    return y.detach(), grads


# ----------------------------------------------------------------------------------------------------------
# Every function of the sample table, every variant, every dtype.
def _cases():
    for info in samples.OPS.values():
        for variant in info.variants:
            for dtype in samples.DTYPES:
                yield pytest.param(info, variant, dtype, id=f"{info.forward}-{variant}-{str(dtype)[6:]}")


def _function(info, dtype, variant, function=None):
    """(fn, differentiable inputs, other tensor inputs): the torch_ext function (or `function`, e.g. the
    native one) with its tensor keyword arguments (mask, group_idx) moved to positional arguments, for
    aot_function."""
    function = function or info.function
    inputs, kwargs = info.function_inputs(dtype, "tiny", variant, samples.generator(0))
    tensors = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    rest = {k: v for k, v in kwargs.items() if not isinstance(v, torch.Tensor)}
    n = len(inputs)

    def fn(*args):
        return function(*args[:n], **dict(zip(tensors, args[n:])), **rest)

    return fn, inputs, list(tensors.values())


@pytest.mark.parametrize("info, variant, dtype", list(_cases()))
def test_function_decomposed(info, variant, dtype):
    fn, inputs, extra = _function(info, dtype, variant)
    traced = Traced(fn)
    y, grads = forward_backward(traced, inputs, extra)
    assert_graphs(traced, info.name)
    y_eager, grads_eager = forward_backward(fn, inputs, extra)
    torch.testing.assert_close(y, y_eager)
    for g, e in zip(grads, grads_eager):
        torch.testing.assert_close(g, e)
    if dtype == f64:  # independent reference: plain PyTorch, float64
        native, _, _ = _function(info, dtype, variant, info.native)
        y_native, grads_native = forward_backward(native, inputs, extra)
        torch.testing.assert_close(y, y_native, rtol=1e-12, atol=1e-12)
        for g, e in zip(grads, grads_native):
            torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("info", list(samples.OPS.values()), ids=lambda i: i.forward)
def test_without_decompositions_the_forward_op_is_in_the_graph(info):
    """What torchair would see without them (and what makes the tests above able to fail)."""
    fn, inputs, extra = _function(info, torch.float32, info.variants[0])
    traced = Traced(fn, decompositions={})
    forward_backward(traced, inputs, extra)
    assert f"npu_ext.{info.forward}.default" in traced.targets("forward")


def test_decompositions_cover_the_forward_ops():
    assert {str(op) for op in DECOMPS} == {f"npu_ext.{op}.default" for op in FORWARD_OPS + ("grouped_bias_add_grad",)}
    assert DECOMPS is not ta.decompositions()  # a new dict each time: callers may update it


# ----------------------------------------------------------------------------------------------------------
# Edge cases, each op called directly.
def compare(fn, args, backward_op):
    """fn(*args) through the decompositions equals eager, forward and gradients, in every dtype. args:
    tensors, the floating ones first (cast to each dtype and differentiated)."""
    n = sum(a.is_floating_point() for a in args)
    assert all(a.is_floating_point() for a in args[:n])
    for dtype in samples.DTYPES:
        diff = [a.to(dtype) for a in args[:n]]
        traced = Traced(fn)
        y, grads = forward_backward(traced, diff, args[n:])
        assert_graphs(traced, backward_op)
        y_eager, grads_eager = forward_backward(fn, diff, args[n:])
        torch.testing.assert_close(y, y_eager, equal_nan=True)
        for g, e in zip(grads, grads_eager):
            torch.testing.assert_close(g, e, equal_nan=True)


SPECIAL_LOGIT_X = torch.tensor([-0.2, 0.0, 1e-7, 1e-3, 0.3, 0.5, 0.999, 1 - 1e-7, 1.0, 1.2, math.nan], dtype=f64)


# eps > 0.5 is left out: the interval [eps, 1 - eps] is empty and ATen's logit kernel, the eager op here,
# gives position-dependent results there (its vectorized loop clamps like torch.clamp, its scalar loop not).
@pytest.mark.parametrize("eps", [None, -1.0, -0.5, 0.0, 1e-6, 0.2, 0.5])
def test_logit_eps(eps):
    x = torch.cat([SPECIAL_LOGIT_X, torch.rand(21, dtype=f64)]).reshape(4, 8)
    compare(lambda t: ops.logit(t, eps), [x], "logit_grad")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_special_values(approximate):
    x = torch.tensor([-math.inf, -60.0, -8.0, -1.0, -1e-30, 0.0, 1e-30, 0.5, 3.0, 60.0, math.inf, math.nan], dtype=f64)
    compare(lambda t: ops.gelu(t, approximate), [x], "gelu_backward_v2")


@pytest.mark.parametrize("x_shape, w_shape", [
    ((7,), (1,)), ((3, 5), (5,)), ((2, 4, 3, 2), (4,)), ((2, 4, 3, 2), (4, 1, 1)), ((2, 4, 3), ()),
    ((2, 4, 3), (1, 1)), ((2, 1, 3), (1,)),
])
def test_prelu_weight_shapes(x_shape, w_shape):
    x = torch.randn(x_shape, dtype=f64)
    x.view(-1)[0] = math.nan
    x.view(-1)[-1] = 0.0
    w = torch.randn(w_shape, dtype=f64)
    compare(lambda t, wt: ops.prelu(t, wt), [x, w], "prelu_backward")


@pytest.mark.parametrize("mask_shape", [(2, 3, 4, 6), (2, 1, 4, 6), (1, 1, 4, 6)])
@pytest.mark.parametrize("scale, fix_triu_mask", [(1.0, False), (0.125, False), (-2.0, False), (0.0, False),
                                                  (0.5, True)])
@pytest.mark.parametrize("fully_masked", ["uniform", "zero"])
def test_scaled_masked_softmax_masks(mask_shape, scale, fix_triu_mask, fully_masked):
    x = torch.randn(2, 3, 4, 6, dtype=f64) * 4
    mask = torch.rand(mask_shape, generator=samples.generator(2)) < 0.3
    mask[..., 1, :] = True  # a fully masked row
    compare(lambda t, m: ops.scaled_masked_softmax(t, m, scale, fix_triu_mask, fully_masked), [x, mask],
            "scaled_masked_softmax_backward")


@pytest.mark.parametrize("group_idx_type", [0, 1])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("sizes", [[8], [0, 3, 0, 5, 0], [1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 8]])
def test_grouped_bias_add_groups(sizes, index_dtype, group_idx_type):
    n, h = sum(sizes), 5
    idx = samples.group_idx_of(sizes, "count" if group_idx_type else "end", index_dtype)
    x, b = torch.randn(n, h, dtype=f64), torch.randn(len(sizes), h, dtype=f64)
    compare(lambda t, bt, i: ops.grouped_bias_add(t, bt, i, group_idx_type), [x, b, idx],
            "grouped_bias_add_grad")


@pytest.mark.parametrize("group_idx_type", [0, 1])
@pytest.mark.parametrize("probs_shape", [(8,), (8, 1)])
def test_grouped_bias_add_probs(probs_shape, group_idx_type):
    sizes = [3, 0, 5]
    idx = samples.group_idx_of(sizes, "count" if group_idx_type else "end", torch.int64)
    x, b, p = torch.randn(8, 5, dtype=f64), torch.randn(3, 5, dtype=f64), torch.rand(probs_shape, dtype=f64)
    compare(lambda t, bt, pt, i: ops.grouped_bias_add(t, bt, i, group_idx_type, pt), [x, b, p, idx],
            "grouped_bias_add_grad")
    x3 = torch.randn(3, 4, 5, dtype=f64)
    compare(lambda t, bt, pt: ops.grouped_bias_add(t, bt, None, 0, pt), [x3, b, torch.rand(3, 4, dtype=f64)],
            "grouped_bias_add_grad")


@pytest.mark.parametrize("bias_shape", [(3, 5), (3, 1, 5)])
def test_grouped_bias_add_3d(bias_shape):
    x, b = torch.randn(3, 4, 5, dtype=f64), torch.randn(bias_shape, dtype=f64)
    compare(lambda t, bt: ops.grouped_bias_add(t, bt), [x, b], "grouped_bias_add_grad")


def test_non_contiguous_inputs():
    """The result is contiguous, as the eager op's."""
    x = torch.rand(6, 4).t()  # (4, 6), transposed
    for fn, bwd in [(lambda t: ops.gelu(t, "tanh"), "gelu_backward_v2"), (lambda t: ops.logit(t, 0.1), "logit_grad")]:
        traced = Traced(fn)
        y, grads = forward_backward(traced, [x], [])
        assert_graphs(traced, bwd)
        assert y.is_contiguous()
        y_eager, grads_eager = forward_backward(fn, [x], [])
        torch.testing.assert_close(y, y_eager)
        torch.testing.assert_close(grads[0], grads_eager[0])


# ----------------------------------------------------------------------------------------------------------
# group_idx values eager mode rejects: NaN in the graphs, and the op only ever sees a valid group_idx (on the
# CPU the npu_ext op checks it and would raise).
BAD_GROUP_IDX = [
    (0, [2, 1, 8]),   # decreasing ends
    (0, [-1, 3, 8]),  # negative
    (0, [2, 3, 7]),   # last end != N
    (0, [2, 3, 9]),   # past N
    (1, [2, -1, 7]),  # a negative count, sum N
    (1, [2, 3, 4]),   # counts sum past N
    (1, [2, 3, 2]),   # counts sum short of N
    (1, [2 ** 62, 2 ** 62, 2 ** 62, 2 ** 62 + 8]),  # the sum overflows int64 to N
]
GOOD_GROUP_IDX = [(0, [2, 2, 8]), (1, [2, 0, 6]), (0, [8]), (1, [0, 8])]


@pytest.mark.parametrize("group_idx_type, values", BAD_GROUP_IDX)
def test_grouped_bias_add_invalid_group_idx_gives_nan(group_idx_type, values):
    idx = torch.tensor(values)
    x, b = torch.randn(8, 4), torch.randn(len(values), 4)
    with pytest.raises(RuntimeError, match="npu_ext.grouped_bias_add: .*group_idx"):
        ops.grouped_bias_add(x, b, idx, group_idx_type)

    def fn(xt, bt, i):
        return ops.grouped_bias_add(xt, bt, i, group_idx_type)

    traced = Traced(fn)
    y, (gx, gb) = forward_backward(traced, [x, b], [idx])
    assert_graphs(traced, "grouped_bias_add_grad")
    assert torch.isnan(y).all()
    assert torch.isnan(gb).all()
    torch.testing.assert_close(gx, loss_weights(y))  # x's gradient is the incoming one
    # the backward op gets group_idx through a `where`, not the graph input itself
    node = next(n for n in traced.graphs["backward"].graph.nodes
                if str(n.target) == "npu_ext.grouped_bias_add_grad.default")
    assert str(node.args[1].target) == "aten.where.self"


@pytest.mark.parametrize("group_idx_type, values", BAD_GROUP_IDX + GOOD_GROUP_IDX)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_grouped_bias_add_grad_checked_group_idx(group_idx_type, values, index_dtype):
    if index_dtype == torch.int32 and max(abs(v) for v in values) >= 2 ** 31:
        pytest.skip("not an int32 value")
    idx = torch.tensor(values, dtype=index_dtype)
    g = torch.randn(8, 3, dtype=torch.float16)
    traced = Traced(lambda gt, i: ops.grouped_bias_add_grad(gt, i, group_idx_type))
    out = traced(g, idx)
    fw = traced.targets("forward")
    assert "npu_ext.grouped_bias_add_grad.default" in fw and "aten.where.self" in fw, fw
    if (group_idx_type, values) in GOOD_GROUP_IDX:
        torch.testing.assert_close(out, ops.grouped_bias_add_grad(g, idx, group_idx_type), rtol=0, atol=0)
    else:
        assert out.dtype == torch.float16 and out.shape == (len(values), 3) and torch.isnan(out).all()


def test_grouped_bias_add_grad_without_group_idx_is_unchanged():
    traced = Traced(lambda g: ops.grouped_bias_add_grad(g))
    g = torch.randn(3, 4, 5)
    torch.testing.assert_close(traced(g), ops.grouped_bias_add_grad(g), rtol=0, atol=0)
    assert traced.targets("forward") == ["npu_ext.grouped_bias_add_grad.default"]


def test_empty_group_idx():
    """G = 0: a compile-time error for N > 0 rows (as eager), an empty result for N = 0."""
    idx = torch.empty(0, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="npu_ext.grouped_bias_add: the last entry of group_idx must equal"):
        Traced(lambda x, b, i: ops.grouped_bias_add(x, b, i))(torch.randn(3, 2), torch.randn(0, 2), idx)
    with pytest.raises(RuntimeError, match="npu_ext.grouped_bias_add_grad: the last entry of group_idx"):
        Traced(lambda g, i: ops.grouped_bias_add_grad(g, i))(torch.randn(3, 2), idx)
    y = Traced(lambda x, b, i: ops.grouped_bias_add(x, b, i))(torch.randn(0, 2), torch.randn(0, 2), idx)
    assert y.shape == (0, 2)


# ----------------------------------------------------------------------------------------------------------
# torch.compile with a backend built like torchair's: AOTAutograd with the decompositions.
def _backend(graphs):
    from torch._dynamo.backends.common import aot_autograd

    def capture(name):
        def compiler(gm, example_inputs):
            graphs.setdefault(name, []).append(gm)
            return gm
        return make_boxed_compiler(compiler)

    return aot_autograd(fw_compiler=capture("forward"), bw_compiler=capture("backward"), decompositions=DECOMPS)


def _model(x, w, z, m, y, b, gidx):
    return (torch_ext.gelu(x).sum() + torch_ext.prelu(x.unsqueeze(0), w).sum() + torch_ext.logit(z, 0.01).sum()
            + torch_ext.scaled_masked_softmax(x.reshape(1, 1, *x.shape), m, 0.5).pow(2).sum()
            + torch_ext.grouped_bias_add(y, b, gidx).pow(2).sum())


@pytest.fixture
def fresh_dynamo():
    with torch._functorch.config.patch(enable_autograd_cache=False):
        torch._dynamo.reset()
        yield
        torch._dynamo.reset()


def test_torch_compile_dynamic(fresh_dynamo):
    graphs = {}
    compiled = torch.compile(_model, backend=_backend(graphs), fullgraph=True, dynamic=True)
    for n in (5, 7):
        inputs = [torch.randn(n, 3), torch.rand(n), torch.rand(n + 1), torch.rand(n, 3) < 0.3,
                  torch.randn(n + 2, 4), torch.randn(2, 4), torch.tensor([1, n + 2])]
        diff = [inputs[i].requires_grad_() for i in (0, 1, 2, 4, 5)]
        got = compiled(*inputs)
        got_grads = torch.autograd.grad(got, diff)
        expected = _model(*inputs)
        torch.testing.assert_close(got, expected)
        for a, e in zip(got_grads, torch.autograd.grad(expected, diff)):
            torch.testing.assert_close(a, e)
    assert len(graphs["forward"]) == 1  # one dynamic graph for both sizes
    for name, bwd in (("forward", ()), ("backward", ("gelu_backward_v2", "prelu_backward", "logit_grad",
                                                      "scaled_masked_softmax_backward", "grouped_bias_add_grad"))):
        targets = {str(n.target) for n in graphs[name][0].graph.nodes if n.op == "call_function"}
        assert {t for t in targets if t.startswith("npu_ext.")} == {f"npu_ext.{op}.default" for op in bwd}
        # _model's own ops (and their derivatives)
        model_ops = {"aten.sym_size.int", "aten.sum.default", "aten.pow.Tensor_Scalar", "aten.mul.Scalar",
                     "aten.squeeze.dim"}
        assert {t for t in targets if t.startswith("aten.")} <= ta.ATEN_OPS | model_ops


def test_torch_compile_still_checks_arguments(fresh_dynamo):
    """Dynamo runs the Meta kernels (and their checks) before AOTAutograd decomposes the ops."""
    compiled = torch.compile(lambda x, m: ops.scaled_masked_softmax(x, m), backend=_backend({}), fullgraph=True)
    with pytest.raises(Exception, match="npu_ext.scaled_masked_softmax: mask must have dtype torch.bool"):
        compiled(torch.randn(1, 1, 2, 3), torch.zeros(1, 1, 2, 3))


# ----------------------------------------------------------------------------------------------------------
# npu_backend() against a stand-in torchair (the real one needs CANN).
@pytest.fixture
def fake_torchair(monkeypatch):
    calls = []

    class CompilerConfig:
        def __init__(self):
            self.mode = types.SimpleNamespace(value="max-autotune")

    def get_npu_backend(*, compiler_config=None, custom_decompositions={}):  # noqa: B006 (torchair's signature)
        calls.append((compiler_config, custom_decompositions))
        return "backend"

    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    fake = types.ModuleType("torchair")
    fake.CompilerConfig, fake.get_npu_backend = CompilerConfig, get_npu_backend
    monkeypatch.setitem(sys.modules, "torchair", fake)
    return fake, calls


def test_npu_backend(fake_torchair):
    fake, calls = fake_torchair
    mine = {torch.ops.aten.relu.default: lambda x: x}
    assert ta.npu_backend(custom_decompositions=mine) == "backend"
    config, decomps = calls[-1]
    assert config.mode.value == "max-autotune"
    assert decomps == {**ta.decompositions(), **mine}

    override = {ops.gelu.default: lambda x, approximate="none": x}
    ta.npu_backend(custom_decompositions=override)
    assert calls[-1][1][ops.gelu.default] is override[ops.gelu.default]  # the caller's win

    config = fake.CompilerConfig()
    config.mode.value = "reduce-overhead"
    ta.npu_backend(compiler_config=config, custom_decompositions=mine)
    assert calls[-1] == (config, mine)  # eager kernels in aclgraph mode: no decompositions


# ----------------------------------------------------------------------------------------------------------
def _torchair_converters(root):
    """{target: implemented} for the torch.ops.aten converters in torchair's ge_converter/aten sources."""
    found = {}
    folder = os.path.join(root, "_ge_concrete_graph", "ge_converter", "aten")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name)) as f:
            tree = ast.parse(f.read())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for dec in fn.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "id", "") == "register_fx_node_ge_converter":
                    target = ast.unparse(dec.args[0]).replace("torch.ops.", "")
                    raises_only = all(isinstance(s, (ast.Raise, ast.Expr)) for s in fn.body)
                    found[target] = not raises_only
    return found


@pytest.mark.skipif(not os.path.isdir(os.environ.get("TORCHAIR_SRC", "")),
                    reason="TORCHAIR_SRC (torch_npu/dynamo/torchair sources) not set")
def test_aten_ops_have_torchair_converters():
    converters = _torchair_converters(os.environ["TORCHAIR_SRC"])
    missing = sorted(op for op in ta.ATEN_OPS if not converters.get(op))
    assert not missing, missing
