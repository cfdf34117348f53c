// Autograd of gelu and gelu_backward_v2 in C++, on the generic Autograd key: applies on every device (CPU, NPU, ...) and
// costs what an ATen derivative costs (no Python on any per-call path). core/autograd.h says how the nodes are
// written and called.
//
// * gelu: the op below autograd; its node's backward is gelu_backward_v2 (below autograd without create_graph, through
//   the dispatcher with it, so that gelu_backward_v2's own node records the double backward).
// * gelu_backward_v2: a direct call builds a node only when grad mode is on and an input requires grad; the node holds the
//   derivative of the backward op (double backward, gradient penalties, Hessian-vector products), written with
//   differentiable ATen and npu_ext ops, 16-bit inputs upcast to fp32. An undefined incoming gradient counts as
//   zero.
#include <ATen/OpMathType.h>
#include <ATen/TensorSubclassLikeUtils.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/autograd.h"
#include "ops/gelu/checks.h"

namespace npu_ext::autograd {
namespace {

// The family's ops (their default overloads), looked up once.
NPU_EXT_OP_HANDLE(gelu_op, "gelu", at::Tensor(const at::Tensor&, c10::string_view))
NPU_EXT_OP_HANDLE(gelu_bwd_op, "gelu_backward_v2", at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view))

struct GeluBackward : public Node {
  SavedVariable self_;
  std::string approximate_;
  std::string name() const override { return "npu_ext_gelu_backward"; }
  void release_variables() override { self_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    variable_list out(1);
    if (task_should_compute_output(0) && grads[0].defined()) {
      const at::Tensor x = self_.unpack();
      out[0] = backward_op([&] { return gelu_bwd_op().call(grads[0], x, approximate_); });
    }
    return out;
  }
};

at::Tensor gelu_autograd(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor result = below_autograd([&] { return gelu_op().call(self, approximate); });
  if (recording() && needs_grad(self)) {
    auto node = attach<GeluBackward>(result, self);
    node->self_ = SavedVariable(self, false);
    node->approximate_ = std::string(approximate);
  }
  return result;
}

// ----------------------------------------------------------------------------------------------------------
// gelu_backward_v2: gi = g * gelu'(x)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kKappa = 0.044715;

// d^2/dx^2 gelu(x) (x already in compute precision).
at::Tensor gelu_second_derivative(const at::Tensor& x, c10::string_view approximate) {
  if (approximate == "tanh") {
    // gelu = 0.5 x (1 + tanh(u)), u = k (x + c x^3):
    // gelu'' = (1 - t^2) (u' - x t u'^2 + 0.5 x u''), u' = k (1 + 3 c x^2), u'' = 6 k c x
    const at::Tensor x2 = x * x;
    const at::Tensor t = at::tanh(kSqrt2OverPi * (x + kKappa * x2 * x));
    const at::Tensor du = kSqrt2OverPi * (1 + 3 * kKappa * x2);
    const at::Tensor ddu = (6 * kSqrt2OverPi * kKappa) * x;
    return (1 - t * t) * (du - x * t * du * du + 0.5 * x * ddu);
  }
  // gelu = x Phi(x): gelu'' = phi(x) (2 - x^2)
  const at::Tensor x2 = x * x;
  return kInvSqrt2Pi * at::exp(-0.5 * x2) * (2 - x2);
}

struct GeluBackwardV2Backward : public Node {
  SavedInput g_, x_;
  std::string approximate_;
  std::string name() const override { return "npu_ext_gelu_backward_v2_backward"; }
  void release_variables() override {
    g_.reset();
    x_.reset();
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(2);
    const at::Tensor& ggi = grads[0];
    if (!ggi.defined()) return out;
    const at::Tensor x = x_.unpack();
    if (task_should_compute_output(0)) {  // gi is linear in g
      out[0] = reduce_to(backward_op([&] { return gelu_bwd_op().call(ggi, x, approximate_); }), g_.sizes,
                         g_.dtype);
    }
    if (task_should_compute_output(1)) {
      const at::Tensor g = g_.unpack();
      out[1] = reduce_to(opmath(ggi) * opmath(g) * gelu_second_derivative(opmath(x), approximate_), x_.sizes,
                         x_.dtype);
    }
    return out;
  }
};

at::Tensor gelu_backward_v2_autograd(const at::Tensor& g, const at::Tensor& x, c10::string_view approximate) {
  at::Tensor result = below_autograd([&] { return gelu_bwd_op().call(g, x, approximate); });
  if (recording() && (needs_grad(g) || needs_grad(x))) {
    auto node = attach<GeluBackwardV2Backward>(result, g, x);
    node->g_.save(g);
    node->x_.save(x);
    node->approximate_ = std::string(approximate);
  }
  return result;
}

}  // namespace

NPU_EXT_AUTOGRAD(gelu, gelu_backward_v2)

}  // namespace npu_ext::autograd
