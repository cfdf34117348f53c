// Autograd of grouped_bias_add and grouped_bias_add_grad in C++, on the generic Autograd key: applies on every device (CPU, NPU, ...) and
// costs what an ATen derivative costs (no Python on any per-call path). core/autograd.h says how the nodes are
// written and called.
//
// * grouped_bias_add: the op below autograd; its node's backward is grouped_bias_add_grad (below autograd without create_graph, through
//   the dispatcher with it, so that grouped_bias_add_grad's own node records the double backward).
// * grouped_bias_add_grad: a direct call builds a node only when grad mode is on and an input requires grad; the node holds the
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
#include "ops/grouped_bias_add/checks.h"

namespace npu_ext::autograd {
namespace {

// The family's ops (their default overloads), looked up once.
NPU_EXT_OP_HANDLE(gba_op, "grouped_bias_add",
                  at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, int64_t,
                             const c10::optional<at::Tensor>&))
NPU_EXT_OP_HANDLE(gba_grad_op, "grouped_bias_add_grad",
                  at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, int64_t))

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

at::Tensor grouped_bias_add_autograd(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
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

at::Tensor grouped_bias_add_grad_autograd(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
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

NPU_EXT_AUTOGRAD(grouped_bias_add, grouped_bias_add_grad)

}  // namespace npu_ext::autograd
