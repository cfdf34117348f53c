// Autograd of prelu and prelu_backward in C++, on the generic Autograd key: applies on every device (CPU, NPU, ...) and
// costs what an ATen derivative costs (no Python on any per-call path). core/autograd.h says how the nodes are
// written and called.
//
// * prelu: the op below autograd; its node's backward is prelu_backward (below autograd without create_graph, through
//   the dispatcher with it, so that prelu_backward's own node records the double backward).
// * prelu_backward: a direct call builds a node only when grad mode is on and an input requires grad; the node holds the
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
#include "ops/prelu/checks.h"

namespace npu_ext::autograd {
namespace {

// The family's ops (their default overloads), looked up once.
NPU_EXT_OP_HANDLE(prelu_op, "prelu", at::Tensor(const at::Tensor&, const at::Tensor&))
NPU_EXT_OP_HANDLE(prelu_bwd_op, "prelu_backward",
                  std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&))

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

}  // namespace

NPU_EXT_AUTOGRAD(prelu, prelu_backward)

}  // namespace npu_ext::autograd
