// Shared by the autograd kernels of csrc/autograd: the op handles, the "below autograd" calls and the node
// helpers. Every npu_ext op's autograd is C++ on the generic Autograd key (forward_ops.cpp: the five forward
// ops, backward_ops.cpp: the five backward ops, whose derivatives are what double backward uses), so it
// applies on every device and costs what an ATen derivative costs: no Python on any per-call path.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include "common/torch_compat.h"

#include <tuple>
#include <utility>

namespace npu_ext {
namespace autograd {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// The ops (their default overloads), looked up once.
#define NPU_EXT_OP_HANDLE(fn, name, ...)                                     \
  inline const c10::TypedOperatorHandle<__VA_ARGS__>& fn() {                 \
    static const auto h = find_op<__VA_ARGS__>("npu_ext::" name);            \
    return h;                                                                \
  }
NPU_EXT_OP_HANDLE(gelu_op, "gelu", at::Tensor(const at::Tensor&, c10::string_view))
NPU_EXT_OP_HANDLE(gelu_bwd_op, "gelu_backward_v2", at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view))
NPU_EXT_OP_HANDLE(prelu_op, "prelu", at::Tensor(const at::Tensor&, const at::Tensor&))
NPU_EXT_OP_HANDLE(prelu_bwd_op, "prelu_backward",
                  std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&))
NPU_EXT_OP_HANDLE(logit_op, "logit", at::Tensor(const at::Tensor&, c10::optional<double>))
NPU_EXT_OP_HANDLE(logit_grad_op, "logit_grad", at::Tensor(const at::Tensor&, const at::Tensor&, double))
NPU_EXT_OP_HANDLE(sms_op, "scaled_masked_softmax",
                  at::Tensor(const at::Tensor&, const at::Tensor&, double, bool, c10::string_view))
NPU_EXT_OP_HANDLE(sms_bwd_op, "scaled_masked_softmax_backward",
                  at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, bool))
NPU_EXT_OP_HANDLE(gba_op, "grouped_bias_add",
                  at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, int64_t,
                             const c10::optional<at::Tensor>&))
NPU_EXT_OP_HANDLE(gba_grad_op, "grouped_bias_add_grad",
                  at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, int64_t))
#undef NPU_EXT_OP_HANDLE

// Calls f() below autograd (the op's backend kernel, through every key under ADInplaceOrView).
template <typename F>
auto below_autograd(F&& f) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return f();
}

// Calls an npu_ext op from a backward formula: through its Autograd kernel only when a graph of the backward
// is being recorded (create_graph / double backward), below autograd otherwise.
template <typename F>
auto backward_op(F&& f) {
  if (at::GradMode::is_enabled()) return f();
  return below_autograd(std::forward<F>(f));
}

inline bool needs_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }

inline bool recording() { return at::GradMode::is_enabled(); }

// A new node of type N whose next edges are the gradient edges of `inputs`; the caller attaches it to the
// op's result(s) with torch::autograd::set_history, in output order.
template <typename N, typename... Inputs>
compat::NodePtr<N> make_node(const Inputs&... inputs) {
  auto node = compat::new_node<N>();
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  return node;
}

// The node of type N attached as the grad_fn of the op's single result.
template <typename N, typename... Inputs>
compat::NodePtr<N> attach(at::Tensor& result, const Inputs&... inputs) {
  auto node = make_node<N>(inputs...);
  torch::autograd::set_history(result, node);
  return node;
}

}  // namespace autograd
}  // namespace npu_ext
