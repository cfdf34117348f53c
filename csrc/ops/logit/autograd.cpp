// Autograd of logit and logit_grad in C++, on the generic Autograd key: applies on every device (CPU, NPU, ...) and
// costs what an ATen derivative costs (no Python on any per-call path). core/autograd.h says how the nodes are
// written and called.
//
// * logit: the op below autograd; its node's backward is logit_grad (below autograd without create_graph, through
//   the dispatcher with it, so that logit_grad's own node records the double backward).
// * logit_grad: a direct call builds a node only when grad mode is on and an input requires grad; the node holds the
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
#include "ops/logit/checks.h"

namespace npu_ext::autograd {
namespace {

// The family's ops (their default overloads), looked up once.
NPU_EXT_OP_HANDLE(logit_op, "logit", at::Tensor(const at::Tensor&, c10::optional<double>))
NPU_EXT_OP_HANDLE(logit_grad_op, "logit_grad", at::Tensor(const at::Tensor&, const at::Tensor&, double))

struct LogitBackward : public Node {
  SavedVariable self_;
  double eps_ = -1.0;
  std::string name() const override { return "npu_ext_logit_backward"; }
  void release_variables() override { self_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    variable_list out(1);
    if (task_should_compute_output(0) && grads[0].defined()) {
      const at::Tensor x = self_.unpack();
      out[0] = backward_op([&] { return logit_grad_op().call(x, grads[0], eps_); });
    }
    return out;
  }
};

at::Tensor logit_autograd(const at::Tensor& self, c10::optional<double> eps) {
  at::Tensor result = below_autograd([&] { return logit_op().call(self, eps); });
  if (recording() && needs_grad(self)) {
    auto node = attach<LogitBackward>(result, self);
    node->self_ = SavedVariable(self, false);
    node->eps_ = eps.has_value() ? *eps : -1.0;
  }
  return result;
}

// ----------------------------------------------------------------------------------------------------------
// logit_grad: dx = dy / (x (1 - x)) on [eps, 1 - eps] (0 elsewhere, NaN x included) when eps >= 0, on [0, 1]
// (NaN elsewhere) otherwise (eps NaN compares false: the eps < 0 branch, as the op).
struct LogitGradBackward : public Node {
  SavedInput x_, dy_;
  double eps_ = -1.0;
  std::string name() const override { return "npu_ext_logit_grad_backward"; }
  void release_variables() override {
    x_.reset();
    dy_.reset();
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(2);
    const at::Tensor& ggx = grads[0];
    if (!ggx.defined()) return out;
    const at::Tensor x = x_.unpack();
    if (task_should_compute_output(1)) {  // linear in dy
      out[1] = backward_op([&] { return logit_grad_op().call(x, ggx, eps_); });
    }
    if (task_should_compute_output(0)) {
      const at::Tensor dy = dy_.unpack();
      const at::Tensor xf = opmath(x);
      const at::Tensor q = xf * (1 - xf);
      at::Tensor val = opmath(ggx) * opmath(dy) * (2 * xf - 1) / (q * q);
      const LogitGradBounds b = logit_grad_bounds(eps_, x_.dtype);  // the op's own interval
      if (b.clamp) {
        val = at::where(xf.ge(b.lo).logical_and_(xf.le(b.hi)), val, 0);
      } else {
        val = at::where(xf.ge(0).logical_and_(xf.le(1)), val, std::numeric_limits<double>::quiet_NaN());
      }
      out[0] = val.to(x_.dtype);
    }
    return out;
  }
};

at::Tensor logit_grad_autograd(const at::Tensor& x, const at::Tensor& dy, double eps) {
  at::Tensor result = below_autograd([&] { return logit_grad_op().call(x, dy, eps); });
  if (recording() && (needs_grad(x) || needs_grad(dy))) {
    auto node = attach<LogitGradBackward>(result, x, dy);
    node->x_.save(x);
    node->dy_.save(dy);
    node->eps_ = eps;
  }
  return result;
}

}  // namespace

NPU_EXT_AUTOGRAD(logit, logit_grad)

}  // namespace npu_ext::autograd
