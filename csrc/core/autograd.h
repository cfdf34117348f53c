// Shared by the autograd kernels (csrc/ops/<family>/autograd.cpp): the op handles, the "below autograd" calls and
// the node helpers. Every npu_ext op's autograd is C++ on the generic Autograd key (the forward ops' nodes call the
// backward ops; the backward ops' nodes hold their derivatives, what double backward uses), so it applies on every
// device and costs what an ATen derivative costs: no Python on any per-call path.
//
// * Forward: the op below autograd (through the dispatcher, so autocast, Meta/Fake and tracing see it). When no
//   input needs a gradient the op is called directly, without building an autograd node.
// * Backward: the matching npu_ext backward operator. Without create_graph it is called below autograd; with
//   create_graph it goes through the dispatcher, whose Autograd kernel for the backward op records the
//   double-backward formula.
// * The graph nodes are written like the nodes ATen generates for its own derivatives (a Node subclass with its
//   SavedVariables, attached with set_history): no AutogradContext, no IValue map, no output wrapping, so a
//   training step costs what an ATen op's does. name() is what grad_fn.name() shows. torch.compile / torch.export
//   trace through these kernels like through any ATen derivative.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include "core/torch_compat.h"

#include <tuple>
#include <utility>
#include <vector>

namespace npu_ext {
namespace autograd {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// NPU_EXT_OP_HANDLE(fn, "name", Sig): fn() is the op npu_ext::name (its default overload), looked up once.
#define NPU_EXT_OP_HANDLE(fn, name, ...)                                     \
  inline const c10::TypedOperatorHandle<__VA_ARGS__>& fn() {                 \
    static const auto h = find_op<__VA_ARGS__>("npu_ext::" name);            \
    return h;                                                                \
  }

// NPU_EXT_AUTOGRAD(forward, backward): registers a family's two Autograd kernels, forward_autograd and
// backward_autograd, for the ops npu_ext::forward and npu_ext::backward (the last lines of each autograd.cpp).
#define NPU_EXT_AUTOGRAD(forward, backward)          \
  TORCH_LIBRARY_IMPL(npu_ext, Autograd, m) {         \
    m.impl(#forward, &forward##_autograd);           \
    m.impl(#backward, &backward##_autograd);         \
  }

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

// t in the dtype the formulas compute in (fp32 for fp16/bf16, else its own dtype).
inline at::Tensor opmath(const at::Tensor& t) {
  const auto dt = t.scalar_type();
  return (dt == at::kHalf || dt == at::kBFloat16) ? t.to(at::kFloat) : t;
}

// Gradient `t` (of a broadcast result) summed to `sizes` and cast to `dtype`.
inline at::Tensor reduce_to(at::Tensor t, c10::SymIntArrayRef sizes, at::ScalarType dtype) {
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

}  // namespace autograd
}  // namespace npu_ext
