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
#include <torch/library.h>

#include <string>

namespace npu_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

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

// The autograd Functions. Their names are the names of the graph nodes (grad_fn.name(), as
// "torch::autograd::CppNode<npu_ext::autograd::npu_ext_gelu_backward>"), hence outside the anonymous namespace.
namespace autograd {

// --------------------------------------------------------------------------------------------------------
struct npu_ext_gelu_backward : public torch::autograd::Function<npu_ext_gelu_backward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const std::string& approximate) {
    ctx->saved_data["approximate"] = approximate;
    ctx->save_for_backward({self});
    return below_autograd([&] { return gelu_op().call(self, approximate); });
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string approximate = ctx->saved_data["approximate"].toStringRef();
    at::Tensor gi = backward_op([&] { return gelu_bwd_op().call(grads[0], saved[0], approximate); });
    return {gi, at::Tensor()};
  }
};

at::Tensor gelu_autograd(const at::Tensor& self, c10::string_view approximate) {
  if (!(recording() && needs_grad(self))) return below_autograd([&] { return gelu_op().call(self, approximate); });
  return npu_ext_gelu_backward::apply(self, std::string(approximate));
}

// --------------------------------------------------------------------------------------------------------
struct npu_ext_prelu_backward : public torch::autograd::Function<npu_ext_prelu_backward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& weight) {
    ctx->save_for_backward({self, weight});
    return below_autograd([&] { return prelu_op().call(self, weight); });
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [gi, gw] = backward_op([&] { return prelu_bwd_op().call(grads[0], saved[0], saved[1]); });
    return {ctx->needs_input_grad(0) ? gi : at::Tensor(), ctx->needs_input_grad(1) ? gw : at::Tensor()};
  }
};

at::Tensor prelu_autograd(const at::Tensor& self, const at::Tensor& weight) {
  if (!(recording() && (needs_grad(self) || needs_grad(weight)))) {
    return below_autograd([&] { return prelu_op().call(self, weight); });
  }
  return npu_ext_prelu_backward::apply(self, weight);
}

// --------------------------------------------------------------------------------------------------------
struct npu_ext_logit_backward : public torch::autograd::Function<npu_ext_logit_backward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, c10::optional<double> eps) {
    ctx->saved_data["eps"] = eps.has_value() ? *eps : -1.0;
    ctx->save_for_backward({self});
    return below_autograd([&] { return logit_op().call(self, eps); });
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const double eps = ctx->saved_data["eps"].toDouble();
    at::Tensor gi = backward_op([&] { return logit_grad_op().call(saved[0], grads[0], eps); });
    return {gi, at::Tensor()};
  }
};

at::Tensor logit_autograd(const at::Tensor& self, c10::optional<double> eps) {
  if (!(recording() && needs_grad(self))) return below_autograd([&] { return logit_op().call(self, eps); });
  return npu_ext_logit_backward::apply(self, eps);
}

// --------------------------------------------------------------------------------------------------------
struct npu_ext_scaled_masked_softmax_backward : public torch::autograd::Function<npu_ext_scaled_masked_softmax_backward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& mask, double scale,
                            bool fix_triu_mask) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["fix_triu_mask"] = fix_triu_mask;
    at::Tensor y = below_autograd([&] { return sms_op().call(x, mask, scale, fix_triu_mask); });
    ctx->save_for_backward({y, mask});
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    const bool fix = ctx->saved_data["fix_triu_mask"].toBool();
    at::Tensor gi = backward_op([&] { return sms_bwd_op().call(grads[0], saved[0], saved[1], scale, fix); });
    return {gi, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sms_autograd(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask) {
  if (!(recording() && needs_grad(x))) {
    return below_autograd([&] { return sms_op().call(x, mask, scale, fix_triu_mask); });
  }
  return npu_ext_scaled_masked_softmax_backward::apply(x, mask, scale, fix_triu_mask);
}

// --------------------------------------------------------------------------------------------------------
struct npu_ext_grouped_bias_add_backward : public torch::autograd::Function<npu_ext_grouped_bias_add_backward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                            const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type) {
    ctx->saved_data["group_idx_type"] = group_idx_type;
    ctx->saved_data["bias_shape"] = bias.sym_sizes();  // symbolic while tracing
    ctx->saved_data["has_group_idx"] = group_idx.has_value() && group_idx->defined();
    ctx->save_for_backward({group_idx.has_value() ? *group_idx : at::Tensor()});
    return below_autograd([&] { return gba_op().call(x, bias, group_idx, group_idx_type); });
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t type = ctx->saved_data["group_idx_type"].toInt();
    const c10::optional<at::Tensor> group_idx =
        ctx->saved_data["has_group_idx"].toBool() ? c10::optional<at::Tensor>(saved[0]) : c10::nullopt;
    at::Tensor d_x = ctx->needs_input_grad(0) ? grads[0] : at::Tensor();
    at::Tensor d_bias;
    if (ctx->needs_input_grad(1)) {
      d_bias = backward_op([&] { return gba_grad_op().call(grads[0], group_idx, type); })
                   .reshape_symint(ctx->saved_data["bias_shape"].toSymIntVector());
    }
    return {d_x, d_bias, at::Tensor(), at::Tensor()};
  }
};

at::Tensor gba_autograd(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                        int64_t group_idx_type) {
  if (!(recording() && (needs_grad(x) || needs_grad(bias)))) {
    return below_autograd([&] { return gba_op().call(x, bias, group_idx, group_idx_type); });
  }
  return npu_ext_grouped_bias_add_backward::apply(x, bias, group_idx, group_idx_type);
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
