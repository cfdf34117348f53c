#include "ops/logit/checks.h"

#include <ATen/ATen.h>

namespace npu_ext {

LogitGradMeta check_logit_grad(const at::Tensor& x, const at::Tensor& dy) {
  constexpr const char* op = "logit_grad";
  check_one_device(op, {{"x", x}, {"dy", dy}});
  check_same_device(op, "dy", dy, "x", x);
  check_float(op, "x", x);
  check_same_dtype(op, "dy", dy, "x", x);
  check_max_rank(op, "x", x, kMaxRank);
  NPU_EXT_CHECK(same_sizes(dy, x), op, "dy must have the shape of x ", shape_str(x.sym_sizes()), ", but got ",
                shape_str(dy.sym_sizes()));
  return {{x.sym_sizes().vec(), x.scalar_type()}};
}

void check_logit(const at::Tensor& self) {
  constexpr const char* op = "logit";
  check_float(op, "self", self);
  check_max_rank(op, "self", self, kMaxRank);
}

}  // namespace npu_ext
