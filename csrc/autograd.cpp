// Autograd of the npu_ext forward ops (gelu, prelu, logit, scaled_masked_softmax, grouped_bias_add) in C++,
// registered on the generic Autograd key: applies on every device (CPU, NPU, ...) and costs what an ATen
// derivative costs (no Python on the per-call path). Compiled once, with no ISA flags.
//
// * Forward: the op below autograd (through the dispatcher, so autocast, Meta/Fake and tracing see it). When
//   no input needs a gradient the op is called directly, without building an autograd node.
// * Backward: the matching npu_ext backward operator. Without create_graph it is called below autograd (no
//   Python at all); with create_graph it goes through the dispatcher, whose Autograd kernel for the backward op
//   (torch_ext/_autograd.py) records the double-backward formula.
//
// torch.compile / torch.export trace through these kernels like through any ATen derivative: the forward and
// backward ops appear as single nodes in the traced graphs.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <string>

namespace npu_ext {
namespace {


template <typename Sig>
c10::TypedOperatorHandle<Sig> op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Sig>();
}

// The ops, looked up once.
using GeluSig = at::Tensor(const at::Tensor&, c10::string_view);
using GeluBwdSig = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);
using PreluSig = at::Tensor(const at::Tensor&, const at::Tensor&);
using PreluBwdSig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&);
using LogitSig = at::Tensor(const at::Tensor&, c10::optional<double>);
using LogitGradSig = at::Tensor(const at::Tensor&, const at::Tensor&, double);
using SmsSig = at::Tensor(const at::Tensor&, const at::Tensor&, double, bool);
using SmsBwdSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, bool);
using GbaSig = at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, int64_t);
using GbaGradSig = at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, int64_t);

const c10::TypedOperatorHandle<GeluSig>& gelu_op() {
  static const auto h = op<GeluSig>("npu_ext::gelu");
  return h;
}
const c10::TypedOperatorHandle<GeluBwdSig>& gelu_bwd_op() {
  static const auto h = op<GeluBwdSig>("npu_ext::gelu_backward_v2");
  return h;
}
const c10::TypedOperatorHandle<PreluSig>& prelu_op() {
  static const auto h = op<PreluSig>("npu_ext::prelu");
  return h;
}
const c10::TypedOperatorHandle<PreluBwdSig>& prelu_bwd_op() {
  static const auto h = op<PreluBwdSig>("npu_ext::prelu_backward");
  return h;
}
const c10::TypedOperatorHandle<LogitSig>& logit_op() {
  static const auto h = op<LogitSig>("npu_ext::logit");
  return h;
}
const c10::TypedOperatorHandle<LogitGradSig>& logit_grad_op() {
  static const auto h = op<LogitGradSig>("npu_ext::logit_grad");
  return h;
}
const c10::TypedOperatorHandle<SmsSig>& sms_op() {
  static const auto h = op<SmsSig>("npu_ext::scaled_masked_softmax");
  return h;
}
const c10::TypedOperatorHandle<SmsBwdSig>& sms_bwd_op() {
  static const auto h = op<SmsBwdSig>("npu_ext::scaled_masked_softmax_backward");
  return h;
}
const c10::TypedOperatorHandle<GbaSig>& gba_op() {
  static const auto h = op<GbaSig>("npu_ext::grouped_bias_add");
  return h;
}
const c10::TypedOperatorHandle<GbaGradSig>& gba_grad_op() {
  static const auto h = op<GbaGradSig>("npu_ext::grouped_bias_add_grad");
  return h;
}

// Calls f() below autograd (the op's backend kernel, through every key under ADInplaceOrView).
template <typename F>
auto below_autograd(F&& f) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return f();
}

// Calls a backward op from a backward formula: through its Autograd kernel only when a graph of the backward
// is being recorded (create_graph / double backward), below autograd otherwise.
template <typename F>
auto backward_op(F&& f) {
  if (at::GradMode::is_enabled()) return f();
  return below_autograd(std::forward<F>(f));
}

bool needs_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }

bool recording() { return at::GradMode::is_enabled(); }

}  // namespace

// The graph nodes, written like the nodes ATen generates for its own derivatives (a Node subclass with its
// SavedVariables, attached with set_history): no AutogradContext, no IValue map, no output wrapping, so a
// training step costs what an ATen op's does. name() is what grad_fn.name() shows.
namespace autograd {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// Attaches `node` (its next edges: the inputs' gradient edges) as the grad_fn of `result`.
template <typename N, typename... Inputs>
c10::intrusive_ptr<N> attach(at::Tensor& result, const Inputs&... inputs) {
  auto node = c10::make_intrusive<N>();
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  torch::autograd::set_history(result, node);
  return node;
}

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

at::Tensor sms_autograd(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask) {
  at::Tensor result = below_autograd([&] { return sms_op().call(x, mask, scale, fix_triu_mask); });
  if (recording() && needs_grad(x)) {
    auto node = attach<ScaledMaskedSoftmaxBackward>(result, x, mask);
    node->result_ = SavedVariable(result, true);
    node->mask_ = SavedVariable(mask, false);
    node->scale_ = scale;
    node->fix_triu_mask_ = fix_triu_mask;
  }
  return result;
}

struct GroupedBiasAddBackward : public Node {
  SavedVariable group_idx_;
  bool has_group_idx_ = false;
  int64_t group_idx_type_ = 0;
  std::vector<c10::SymInt> bias_shape_;
  std::string name() const override { return "npu_ext_grouped_bias_add_backward"; }
  void release_variables() override { group_idx_.reset_data(); }
  variable_list apply(variable_list&& grads) override {
    variable_list out(3);  // x, bias, group_idx (never differentiable)
    if (!grads[0].defined()) return out;
    if (task_should_compute_output(0)) out[0] = grads[0];
    if (task_should_compute_output(1)) {
      const c10::optional<at::Tensor> group_idx =
          has_group_idx_ ? c10::optional<at::Tensor>(group_idx_.unpack()) : c10::nullopt;
      out[1] = backward_op([&] { return gba_grad_op().call(grads[0], group_idx, group_idx_type_); })
                   .reshape_symint(bias_shape_);
    }
    return out;
  }
};

at::Tensor gba_autograd(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                        int64_t group_idx_type) {
  at::Tensor result = below_autograd([&] { return gba_op().call(x, bias, group_idx, group_idx_type); });
  if (recording() && (needs_grad(x) || needs_grad(bias))) {
    auto node = attach<GroupedBiasAddBackward>(result, x, bias, group_idx);
    node->has_group_idx_ = group_idx.has_value() && group_idx->defined();
    if (node->has_group_idx_) node->group_idx_ = SavedVariable(*group_idx, false);
    node->group_idx_type_ = group_idx_type;
    node->bias_shape_ = bias.sym_sizes().vec();  // symbolic while tracing
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
