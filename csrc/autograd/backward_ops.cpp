// Autograd of the npu_ext backward ops (gelu_backward_v2, prelu_backward, logit_grad,
// scaled_masked_softmax_backward, grouped_bias_add_grad) in C++, on the generic Autograd key. Compiled once,
// with no ISA flags.
//
// * A direct call (torch.ops.npu_ext.logit_grad(...), a hand-written autograd.Function, the nodes of
//   forward_ops.cpp under create_graph) runs the op below autograd, and builds a node only when grad mode is on
//   and an input requires grad: the per-call cost of an ATen op, no Python.
// * The nodes hold the derivatives of the backward ops (what double backward, gradient penalties and
//   Hessian-vector products use). They are written with ATen ops and npu_ext ops called through the dispatcher,
//   all differentiable, so higher orders work too. 16-bit inputs are upcast to fp32 for these formulas and the
//   results rounded back to the input dtype. An undefined incoming gradient counts as zero.
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/common.h"
#include "common/checks.h"

namespace npu_ext {
namespace autograd {
namespace {

// t in the dtype the formulas compute in (fp32 for fp16/bf16, else its own dtype).
at::Tensor opmath(const at::Tensor& t) {
  const auto dt = t.scalar_type();
  return (dt == at::kHalf || dt == at::kBFloat16) ? t.to(at::kFloat) : t;
}

// Gradient `t` (of a broadcast result) summed to `sizes` and cast to `dtype`.
at::Tensor reduce_to(at::Tensor t, c10::SymIntArrayRef sizes, at::ScalarType dtype) {
  if (t.sym_sizes() != sizes) t = t.sum_to_size_symint(sizes);
  return t.to(dtype);
}

// What a saved input is needed for: its sizes and dtype, besides the tensor itself.
struct SavedInput {
  SavedVariable var;
  std::vector<c10::SymInt> sizes;
  at::ScalarType dtype = at::kFloat;

  void save(const at::Tensor& t) {
    var = SavedVariable(t, false);
    sizes = t.sym_sizes().vec();
    dtype = t.scalar_type();
  }
  at::Tensor unpack() const { return var.unpack(); }
  void reset() { var.reset_data(); }
};

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

// ----------------------------------------------------------------------------------------------------------
// prelu_backward: gi = where(x > 0, g, w_c g); gw_c = sum over dims != 1 of where(x > 0, 0, x g) (NaN x: the
// x <= 0 branch), w_c the weight broadcast along dim 1.

// The weight (or its gradient: 1 or C elements, any shape) viewed to broadcast against x along dim 1.
at::Tensor channel_view(const at::Tensor& w, const at::Tensor& x) {
  if (x.dim() > 1) {
    std::vector<c10::SymInt> shape(static_cast<size_t>(x.dim()), c10::SymInt(1));
    shape[1] = w.sym_numel();
    return w.reshape_symint(shape);
  }
  return w.reshape({});
}

struct PreluBackwardBackward : public Node {
  SavedInput g_, x_, w_;
  std::string name() const override { return "npu_ext_prelu_backward_backward"; }
  void release_variables() override {
    g_.reset();
    x_.reset();
    w_.reset();
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(3);
    if (!grads[0].defined() && !grads[1].defined()) return out;
    // One of the two may be undefined (zero): it is materialized, as autograd.Function does.
    const at::Tensor ggi = grads[0].defined() ? grads[0] : input_metadata(0).zeros_like();
    const at::Tensor ggw = grads[1].defined() ? grads[1] : input_metadata(1).zeros_like();
    const at::Tensor g = g_.unpack(), x = x_.unpack(), w = w_.unpack();
    const at::Tensor pos = x > 0;
    const at::Tensor ggw_c = channel_view(ggw, x);
    if (task_should_compute_output(0)) {
      out[0] = reduce_to(at::where(pos, ggi, ggi * channel_view(w, x)) + at::where(pos, 0, x * ggw_c), g_.sizes,
                         g_.dtype);
    }
    // gi is piecewise linear in x (zero derivative almost everywhere); gw is linear in x on the x <= 0 side.
    if (task_should_compute_output(1)) {
      out[1] = reduce_to(at::where(pos, 0, g * ggw_c), x_.sizes, x_.dtype);
    }
    if (task_should_compute_output(2)) {
      at::Tensor t = at::where(pos, 0, g * ggi);
      if (w.sym_numel() != 1 && x.dim() > 1) {
        std::vector<int64_t> dims;
        for (int64_t d = 0; d < x.dim(); ++d) {
          if (d != 1) dims.push_back(d);
        }
        t = t.sum(dims);
      } else {
        t = t.sum();
      }
      out[2] = t.reshape_symint(w_.sizes).to(w_.dtype);
    }
    return out;
  }
};

std::tuple<at::Tensor, at::Tensor> prelu_backward_autograd(const at::Tensor& g, const at::Tensor& x,
                                                           const at::Tensor& w) {
  auto [gi, gw] = below_autograd([&] { return prelu_bwd_op().call(g, x, w); });
  if (recording() && (needs_grad(g) || needs_grad(x) || needs_grad(w))) {
    auto node = make_node<PreluBackwardBackward>(g, x, w);
    torch::autograd::set_history(gi, node);
    torch::autograd::set_history(gw, node);
    node->g_.save(g);
    node->x_.save(x);
    node->w_.save(w);
  }
  return {gi, gw};
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

at::Tensor sms_backward_autograd(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask, double scale,
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

// ----------------------------------------------------------------------------------------------------------
// grouped_bias_add_grad: the per-group row sum of grad_y. Its adjoint is the per-group broadcast of the
// incoming (G, H) gradient over the group's rows.
struct GroupedBiasAddGradBackward : public Node {
  SavedVariable group_idx_;
  bool has_group_idx_ = false;
  int64_t group_idx_type_ = 0;
  std::vector<c10::SymInt> grad_y_sizes_;
  at::ScalarType grad_y_dtype_ = at::kFloat;
  std::string name() const override { return "npu_ext_grouped_bias_add_grad_backward"; }
  void release_variables() override { group_idx_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    variable_list out(2);  // grad_y, group_idx (never differentiable)
    if (!grads[0].defined() || !task_should_compute_output(0)) return out;
    const at::Tensor gg = grads[0].to(grad_y_dtype_);
    if (!has_group_idx_) {
      out[0] = gg.unsqueeze(1).expand_symint(grad_y_sizes_);
    } else {
      const at::Tensor zeros = at::zeros_symint(grad_y_sizes_, gg.options());
      const c10::optional<at::Tensor> group_idx = group_idx_.unpack();
      out[0] = gba_op().call(zeros, gg, group_idx, group_idx_type_, c10::nullopt);
    }
    return out;
  }
};

at::Tensor gba_grad_autograd(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                             int64_t group_idx_type) {
  at::Tensor result = below_autograd([&] { return gba_grad_op().call(grad_y, group_idx, group_idx_type); });
  if (recording() && needs_grad(grad_y)) {
    auto node = attach<GroupedBiasAddGradBackward>(result, grad_y, group_idx);
    node->has_group_idx_ = group_idx.has_value() && group_idx->defined();
    if (node->has_group_idx_) node->group_idx_ = SavedVariable(*group_idx, false);
    node->group_idx_type_ = group_idx_type;
    node->grad_y_sizes_ = grad_y.sym_sizes().vec();
    node->grad_y_dtype_ = grad_y.scalar_type();
  }
  return result;
}

}  // namespace
}  // namespace autograd

TORCH_LIBRARY_IMPL(npu_ext, Autograd, m) {
  m.impl("gelu_backward_v2", &autograd::gelu_backward_v2_autograd);
  m.impl("prelu_backward", &autograd::prelu_backward_autograd);
  m.impl("logit_grad", &autograd::logit_grad_autograd);
  m.impl("scaled_masked_softmax_backward", &autograd::sms_backward_autograd);
  m.impl("grouped_bias_add_grad", &autograd::gba_grad_autograd);
}

}  // namespace npu_ext
