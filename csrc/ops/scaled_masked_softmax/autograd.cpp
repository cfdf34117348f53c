// Autograd of scaled_masked_softmax and scaled_masked_softmax_backward in C++, on the generic Autograd key: applies on every device (CPU, NPU, ...) and
// costs what an ATen derivative costs (no Python on any per-call path). core/autograd.h says how the nodes are
// written and called.
//
// * scaled_masked_softmax: the op below autograd; its node's backward is scaled_masked_softmax_backward (below autograd without create_graph, through
//   the dispatcher with it, so that scaled_masked_softmax_backward's own node records the double backward).
// * scaled_masked_softmax_backward: a direct call builds a node only when grad mode is on and an input requires grad; the node holds the
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
#include "ops/scaled_masked_softmax/checks.h"

namespace npu_ext::autograd {
namespace {

// The family's ops (their default overloads), looked up once.
NPU_EXT_OP_HANDLE(sms_op, "scaled_masked_softmax",
                  at::Tensor(const at::Tensor&, const at::Tensor&, double, bool, c10::string_view))
NPU_EXT_OP_HANDLE(sms_bwd_op, "scaled_masked_softmax_backward",
                  at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, bool))

struct ScaledMaskedSoftmaxBackward : public Node {
  SavedVariable result_, mask_;
  double scale_ = 1.0;
  bool fix_triu_mask_ = false;
  std::string name() const override { return "npu_ext_scaled_masked_softmax_backward"; }
  void release_variables() override {
    result_.reset_data();
    mask_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(2);  // x, mask (never differentiable)
    if (task_should_compute_output(0) && grads[0].defined()) {
      const at::Tensor y = result_.unpack(getptr()), m = mask_.unpack();
      out[0] = backward_op([&] { return sms_bwd_op().call(grads[0], y, m, scale_, fix_triu_mask_); });
    }
    return out;
  }
};

// fully_masked="zero" needs nothing of its own here: a zero row of y gets a zero gradient from the backward op
// (scale * (g - sum(g * y)) * y), which is the exact derivative there (y does not depend on x in that row).
at::Tensor scaled_masked_softmax_autograd(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                        c10::string_view fully_masked) {
  at::Tensor result = below_autograd([&] { return sms_op().call(x, mask, scale, fix_triu_mask, fully_masked); });
  if (recording() && needs_grad(x)) {
    auto node = attach<ScaledMaskedSoftmaxBackward>(result, x, mask);
    node->result_ = SavedVariable(result, true);
    node->mask_ = SavedVariable(mask, false);
    node->scale_ = scale;
    node->fix_triu_mask_ = fix_triu_mask;
  }
  return result;
}

// ----------------------------------------------------------------------------------------------------------
// scaled_masked_softmax_backward: out = where(m, 0, scale (g - s) y), s = sum_row(g y)
struct ScaledMaskedSoftmaxBackwardBackward : public Node {
  SavedInput g_, y_;
  SavedVariable mask_;
  double scale_ = 1.0;
  bool fix_triu_mask_ = false;
  std::string name() const override { return "npu_ext_scaled_masked_softmax_backward_backward"; }
  void release_variables() override {
    g_.reset();
    y_.reset();
    mask_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(3);  // g, y, mask (never differentiable)
    const at::Tensor& gg = grads[0];
    const bool dg = task_should_compute_output(0), dy = task_should_compute_output(1);
    if (!gg.defined() || !(dg || dy)) return out;
    const at::Tensor g = g_.unpack(), y = y_.unpack();
    const at::Tensor m = fix_triu_mask_
                             ? at::ones_symint({y.sym_size(-2), y.sym_size(-1)}, y.options().dtype(at::kBool)).triu(1)
                             : mask_.unpack();
    const at::Tensor a = at::where(m, 0, opmath(gg));
    const at::Tensor gf = opmath(g), yf = opmath(y);
    const at::Tensor ay = (a * yf).sum(-1, true);
    if (dg) out[0] = (scale_ * yf * (a - ay)).to(g_.dtype);
    if (dy) {
      const at::Tensor s = (gf * yf).sum(-1, true);
      out[1] = (scale_ * (a * (gf - s) - gf * ay)).to(y_.dtype);
    }
    return out;
  }
};

at::Tensor scaled_masked_softmax_backward_autograd(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask, double scale,
                                 bool fix_triu_mask) {
  at::Tensor result = below_autograd([&] { return sms_bwd_op().call(g, y, mask, scale, fix_triu_mask); });
  if (recording() && (needs_grad(g) || needs_grad(y))) {
    auto node = attach<ScaledMaskedSoftmaxBackwardBackward>(result, g, y, mask);
    node->g_.save(g);
    node->y_.save(y);
    node->mask_ = SavedVariable(mask, false);
    node->scale_ = scale;
    node->fix_triu_mask_ = fix_triu_mask;
  }
  return result;
}

}  // namespace

NPU_EXT_AUTOGRAD(scaled_masked_softmax, scaled_masked_softmax_backward)

}  // namespace npu_ext::autograd
