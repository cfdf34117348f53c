// Validation and shape/dtype inference of logit and logit_grad.
//
// Each check validates one call and returns what it infers (the output specs and the parsed arguments); the CPU,
// Meta, composite and NPU kernels of the family all call it first, so an input is accepted or rejected alike on
// every device with the same message (core/checks.h: the conventions and the shared helpers).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <vector>

#include "core/checks.h"

namespace npu_ext {

struct LogitGradMeta {
  OutputSpec dx;  // x's shape and dtype
};

LogitGradMeta check_logit_grad(const at::Tensor& x, const at::Tensor& dy);

// The interval on which dx = dy / (x (1 - x)), as the op uses it: [eps, 1 - eps] with eps rounded to fp32 (as
// the NPU kernel does; fp64 inputs keep it exact) and 1 - eps computed in that precision, 0 elsewhere (clamp);
// for eps < 0 or NaN, [0, 1] with NaN elsewhere. "Elsewhere" includes x = NaN, as the NPU kernel selects
// (x >= lo AND x <= hi keeps the quotient): NaN x gives 0 when eps >= 0 and NaN otherwise.
struct LogitGradBounds {
  bool clamp;
  double lo, hi;
};

inline LogitGradBounds logit_grad_bounds(double eps, at::ScalarType x_dtype) {
  const bool fp64 = x_dtype == at::kDouble;
  const double e = fp64 ? eps : static_cast<double>(static_cast<float>(eps));
  if (!(e >= 0)) return {false, 0.0, 1.0};
  return {true, e, fp64 ? 1.0 - e : static_cast<double>(1.0f - static_cast<float>(e))};
}

// logit(self, eps): self fp16/bf16/fp32 (fp64 off-NPU), rank <= 8 (logit_grad's limit).
void check_logit(const at::Tensor& self);

}  // namespace npu_ext
