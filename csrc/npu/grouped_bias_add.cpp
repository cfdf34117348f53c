// npu_ext::grouped_bias_add on the NPU (PrivateUse1). There is no aclnn forward operator for it (the forward-op
// audit found none in ops-nn / ops-math; GroupedMatmul adds its bias inside the matmul), so it is the fewest
// device kernels its contract allows, with no per-row host loop:
//   * bias rows: without group_idx, bias viewed as (G, 1, H) (no kernel); with group_idx, bias.repeat_interleave(
//     counts, 0, N) (aclnnRepeatInterleaveWithDim, 1 kernel), the counts copied to the device from the host check;
//   * without probs: x + rows in x's dtype (aclnnAdd, 1 kernel). A correctly rounded 16-bit add equals the
//     contract's fp32 add rounded once (fp32 has at least 2p + 2 bits of a 16-bit type's p: the double rounding is
//     innocuous);
//   * with probs: in fp32 for 16-bit x (x + rows * probs is two roundings there, not one 16-bit operation): the
//     bias cast before its rows are spread, addcmul(x32, rows32, probs32) (its product then its sum, each rounded
//     in fp32, as the contract; aclnnAddcmul's fp32 arithmetic is unaudited) and one cast back; casts only where a
//     dtype differs (at most 5 kernels).
// group_idx's values are still checked on the host (group_offsets: one small device-to-host copy), as aclnn's
// backward checks none of them; empty x gives an empty result without a kernel.
#include "common/forward_composite.h"
#include "npu/npu_common.h"

#include <ATen/OpMathType.h>

#include <vector>

namespace npu_ext {
namespace grouped_bias_add_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "grouped_bias_add";

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  check_npu_float(kOp, "x", x);
  if (npu::forward_composite_forced()) return composite::grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  c10::OptionalDeviceGuard guard(x.device());
  const at::ScalarType compute = probs.has_value() ? at::toOpMathType(x.scalar_type()) : x.scalar_type();
  const at::Tensor b = bias.to(compute);  // (G, H): cast before the rows are spread (no kernel when equal)
  at::Tensor rows;  // the bias of every row of x, broadcastable to x
  if (group_idx.has_value()) {
    npu::check_not_capturing(kOp, "validating group_idx");
    const int64_t n = x.size(0);
    const auto offsets = group_offsets(kOp, "x", group_idx->cpu(), group_idx_type, n);
    std::vector<int64_t> counts(offsets.size() - 1);
    for (size_t j = 0; j + 1 < offsets.size(); ++j) counts[j] = offsets[j + 1] - offsets[j];
    const at::Tensor repeats = at::tensor(counts, at::TensorOptions().dtype(at::kLong)).to(x.device());
    rows = b.repeat_interleave(repeats, 0, n);
  } else {
    rows = b.reshape({x.size(0), 1, x.size(2)});
  }
  if (!probs.has_value()) return at::add(x, rows).contiguous();
  const at::Tensor p = probs->to(compute).reshape(x.sizes().slice(0, x.dim() - 1).vec()).unsqueeze(-1);
  return at::addcmul(x.to(compute), rows, p).to(x.scalar_type()).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) { m.impl("grouped_bias_add", &grouped_bias_add); }

}  // namespace grouped_bias_add_npu
}  // namespace npu_ext
