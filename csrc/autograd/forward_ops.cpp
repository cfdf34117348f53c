// Autograd of the npu_ext forward ops (gelu, prelu, logit, scaled_masked_softmax, grouped_bias_add) in C++,
// registered on the generic Autograd key: applies on every device (CPU, NPU, ...) and costs what an ATen
// derivative costs (no Python on the per-call path). Compiled once, with no ISA flags.
//
// * Forward: the op below autograd (through the dispatcher, so autocast, Meta/Fake and tracing see it). When
//   no input needs a gradient the op is called directly, without building an autograd node.
// * Backward: the matching npu_ext backward operator. Without create_graph it is called below autograd; with
//   create_graph it goes through the dispatcher, whose Autograd kernel for the backward op (backward_ops.cpp)
//   records the double-backward formula.
//
// torch.compile / torch.export trace through these kernels like through any ATen derivative: the forward and
// backward ops appear as single nodes in the traced graphs.
//
// The graph nodes are written like the nodes ATen generates for its own derivatives (a Node subclass with its
// SavedVariables, attached with set_history): no AutogradContext, no IValue map, no output wrapping, so a
// training step costs what an ATen op's does. name() is what grad_fn.name() shows.
#include <ATen/OpMathType.h>
#include <ATen/TensorSubclassLikeUtils.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "autograd/common.h"

namespace npu_ext {
namespace autograd {

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

struct PreluBackward : public Node {
  SavedVariable self_, weight_;
  std::string name() const override { return "npu_ext_prelu_backward"; }
  void release_variables() override {
    self_.reset_data();
    weight_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(2);
    const bool gi = task_should_compute_output(0), gw = task_should_compute_output(1);
    if ((gi || gw) && grads[0].defined()) {
      const at::Tensor x = self_.unpack(), w = weight_.unpack();
      auto [d_x, d_w] = backward_op([&] { return prelu_bwd_op().call(grads[0], x, w); });
      if (gi) out[0] = d_x;
      if (gw) out[1] = d_w;
    }
    return out;
  }
};

at::Tensor prelu_autograd(const at::Tensor& self, const at::Tensor& weight) {
  at::Tensor result = below_autograd([&] { return prelu_op().call(self, weight); });
  if (recording() && (needs_grad(self) || needs_grad(weight))) {
    auto node = attach<PreluBackward>(result, self, weight);
    node->self_ = SavedVariable(self, false);
    node->weight_ = SavedVariable(weight, false);
  }
  return result;
}

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
at::Tensor sms_autograd(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
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

// out = x + bias[group] (+ probs * bias[group] with probs):
//   d x     = grad
//   d bias  = grouped_bias_add_grad(grad)                    (grad * probs, in the compute dtype, with probs)
//   d probs = sum over the last dim of grad * bias[group]    (in the compute dtype, then probs' dtype)
// The compute dtype is fp32 for fp16/bf16 x (fp64 for fp64): the products are not rounded to 16 bits before
// the fp32 sums, as autograd of the PyTorch expression `x + probs * bias_rows` with fp32 probs computes them.
// Two ways to the same values, by device:
//   * the CPU: grad cast once to the compute dtype, the bias rows spread by the forward op (its vectorized
//     kernel, a zero-stride zero plus the bias), products in place. A CPU multiply of mixed dtypes would cast
//     grad again for each product (TensorIterator materializes the cast on the CPU).
//   * other devices (the NPU): a 16-bit grad is never cast: a 16-bit by fp32 multiply gives the product in fp32
//     (exact for two 16-bit values), which aclnnMul does in one kernel without casts (its mixed-dtype path); the
//     rows are one repeat_interleave of the fp32 bias on the device. On the NPU with both gradients wanted: the bias
//     cast (G x H), its rows spread, grad * rows, the sum (d probs); grad * probs into the same buffer,
//     grouped_bias_add_grad, the cast back (G x H) (d bias). docs/performance.md counts them.
struct GroupedBiasAddBackward : public Node {
  SavedVariable group_idx_, bias_, probs_;
  bool has_group_idx_ = false;
  bool has_probs_ = false;
  int64_t group_idx_type_ = 0;
  std::vector<c10::SymInt> bias_shape_;
  std::string name() const override { return "npu_ext_grouped_bias_add_backward"; }
  void release_variables() override {
    group_idx_.reset_data();
    bias_.reset_data();
    probs_.reset_data();
  }
  // The bias row of every row of g, in b's dtype: (G, 1, H) against g (G, C, H) without group_idx (a view);
  // with group_idx a new tensor. On a device other than the CPU, in eager mode: b repeated by the group sizes (one
  // repeat_interleave; cumulative ends differenced first), without reading group_idx back to the host: the forward
  // op validated it, and SavedVariable refuses it if it was modified in place since. On the CPU, and in a traced
  // graph (fake or functional tensors, a dispatch mode: torch.compile, torchair), which has no such guarantee
  // (torchair's graphs replace an invalid group_idx in the forward op, not here): the forward op itself (a
  // zero-stride zero plus the bias), which checks or sanitizes group_idx as that mode does.
  at::Tensor bias_rows(const at::Tensor& b, const c10::optional<at::Tensor>& group_idx, const at::Tensor& g) const {
    if (!group_idx.has_value()) return b.unsqueeze(1);
    if (g.is_cpu() || at::isTensorSubclassLike(*group_idx) || group_idx->is_meta()) {
      return backward_op([&] {
        return gba_op().call(at::zeros({}, b.options()).expand_symint(g.sym_sizes()), b, group_idx, group_idx_type_,
                             c10::nullopt);
      });
    }
    at::Tensor counts = *group_idx;
    if (group_idx_type_ == 0) counts = at::diff(counts, 1, 0, at::zeros({1}, counts.options()));
    return at::repeat_interleave_symint(b, counts, 0, g.sym_size(0));
  }
  variable_list apply(variable_list&& grads) override {
    variable_list out(4);  // x, bias, group_idx (never differentiable), probs
    const at::Tensor& g = grads[0];
    if (!g.defined()) return out;
    if (task_should_compute_output(0)) out[0] = g;
    const bool want_bias = task_should_compute_output(1), want_probs = has_probs_ && task_should_compute_output(3);
    if (!want_bias && !want_probs) return out;
    const c10::optional<at::Tensor> group_idx =
        has_group_idx_ ? c10::optional<at::Tensor>(group_idx_.unpack()) : c10::nullopt;
    if (!has_probs_) {
      out[1] = backward_op([&] { return gba_grad_op().call(g, group_idx, group_idx_type_); }).reshape_symint(bias_shape_);
      return out;
    }
    const at::Tensor probs = probs_.unpack();
    const at::ScalarType acc = at::toOpMathType(g.scalar_type());
    const at::Tensor g_acc = g.is_cpu() ? g.to(acc) : g;  // the grad multiplied (see above)
    // Outside create_graph, products are written into buffers of this backward (the spread rows, then the same
    // buffer or the cast grad for grad * probs): 4 B per element of the whole activation (fresh pages each), which
    // cost more than the arithmetic (docs/performance.md, Megatron rows). grad itself is never written.
    const bool in_place = !at::GradMode::is_enabled();
    at::Tensor scratch;  // an fp32 buffer of grad's shape that this backward owns, once d probs is done
    if (want_probs) {
      at::Tensor rows = bias_rows(bias_.unpack().to(acc), group_idx, g);
      scratch = in_place && group_idx.has_value() ? at::mul_out(rows, g_acc, rows) : at::mul(g_acc, rows);
      out[3] = scratch.sum(-1).to(probs.scalar_type()).reshape_symint(probs.sym_sizes());
    }
    if (want_bias) {
      // probs as a column against grad's rows: (N, 1) or (G, C, 1).
      const at::Tensor p = probs.to(acc).reshape_symint(g.sym_sizes().slice(0, g.dim() - 1)).unsqueeze(-1);
      at::Tensor gp;
      if (!in_place) {
        gp = at::mul(g_acc, p);
      } else if (scratch.defined()) {
        gp = at::mul_out(scratch, g_acc, p);
      } else {
        gp = g_acc.is_same(g) ? at::mul(g_acc, p) : g_acc.mul_(p);
      }
      out[1] = backward_op([&] { return gba_grad_op().call(gp, group_idx, group_idx_type_); })
                   .to(g.scalar_type())
                   .reshape_symint(bias_shape_);
    }
    return out;
  }
};

at::Tensor gba_autograd(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                        int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  at::Tensor result = below_autograd([&] { return gba_op().call(x, bias, group_idx, group_idx_type, probs); });
  const bool has_probs = probs.has_value() && probs->defined();
  if (recording() && (needs_grad(x) || needs_grad(bias) || (has_probs && needs_grad(*probs)))) {
    auto node = attach<GroupedBiasAddBackward>(result, x, bias, group_idx, probs);
    node->has_group_idx_ = group_idx.has_value() && group_idx->defined();
    if (node->has_group_idx_) node->group_idx_ = SavedVariable(*group_idx, false);
    node->group_idx_type_ = group_idx_type;
    node->bias_shape_ = bias.sym_sizes().vec();  // symbolic while tracing
    node->has_probs_ = has_probs;
    if (has_probs) {
      node->probs_ = SavedVariable(*probs, false);
      node->bias_ = SavedVariable(bias, false);  // for d probs only
    }
  }
  return result;
}

}  // namespace autograd

TORCH_LIBRARY_IMPL(npu_ext, Autograd, m) {
  m.impl("gelu", &autograd::gelu_autograd);
  m.impl("prelu", &autograd::prelu_autograd);
  m.impl("logit", &autograd::logit_autograd);
  m.impl("scaled_masked_softmax", &autograd::sms_autograd);
  m.impl("grouped_bias_add", &autograd::gba_autograd);
}

}  // namespace npu_ext
