// npu_ext::grouped_bias_add_grad on the NPU (PrivateUse1):
//   group_idx_type 0 (cumulative end offsets) or no group_idx: aclnnGroupedBiasAddGrad(gradY, groupIdxOptional, out)
//   group_idx_type 1 (per-group counts):                       aclnnGroupedBiasAddGradV2(gradY, groupIdxOptional,
//                                                                                         int64 groupIdxType, out)
// aclnn checks none of the group_idx values (and reads out of bounds on bad ones), so a host copy of group_idx
// is validated by the shared group_offsets() before the call. Groups with no rows are sums over nothing: the
// output is zero-filled first, since aclnn leaves such rows untouched.
#include "npu/npu_common.h"

#include <vector>

namespace npu_ext {
namespace {

constexpr const char* kOp = "grouped_bias_add_grad";

// Returns true when some group has no rows (or there are no rows at all).
bool validate(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type,
              GroupedBiasAddGradMeta& meta) {
  meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  check_npu_float(kOp, "grad_y", grad_y);
  if (!group_idx.has_value()) return grad_y.size(1) == 0;
  const std::vector<int64_t> offsets = group_offsets(kOp, "grad_y", group_idx->cpu(), group_idx_type, grad_y.size(0));
  for (size_t j = 0; j + 1 < offsets.size(); ++j) {
    if (offsets[j + 1] == offsets[j]) return true;
  }
  return false;
}

void run(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type,
         bool has_empty_group, const at::Tensor& out) {
  if (out.numel() == 0) return;
  if (has_empty_group) out.zero_();
  if (grad_y.numel() == 0) return;
  if (group_idx.has_value() && group_idx_type == 1) {
    EXEC_NPU_CMD_EXT(aclnnGroupedBiasAddGradV2, grad_y, group_idx, group_idx_type, out);
  } else {
    EXEC_NPU_CMD_EXT(aclnnGroupedBiasAddGrad, grad_y, group_idx, out);
  }
}

at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  GroupedBiasAddGradMeta meta;
  const bool has_empty_group = validate(grad_y, group_idx, group_idx_type, meta);
  c10::OptionalDeviceGuard guard(grad_y.device());
  at::Tensor out = at::empty_symint({meta.groups, meta.hidden}, grad_y.options());
  run(grad_y, group_idx, group_idx_type, has_empty_group, out);
  return out;
}

void grouped_bias_add_grad_out(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                               int64_t group_idx_type, const at::Tensor& out) {
  GroupedBiasAddGradMeta meta;
  const bool has_empty_group = validate(grad_y, group_idx, group_idx_type, meta);
  check_out(kOp, "out", out, {meta.groups, meta.hidden}, grad_y.scalar_type(), grad_y);
  c10::OptionalDeviceGuard guard(grad_y.device());
  run(grad_y, group_idx, group_idx_type, has_empty_group, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("grouped_bias_add_grad", &grouped_bias_add_grad);
  m.impl("grouped_bias_add_grad.out", &grouped_bias_add_grad_out);
}

}  // namespace npu_ext
