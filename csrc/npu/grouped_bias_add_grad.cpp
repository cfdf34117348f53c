// npu_ext::grouped_bias_add_grad on the NPU (PrivateUse1):
//   group_idx_type 0 (cumulative end offsets) or no group_idx: aclnnGroupedBiasAddGrad(gradY, groupIdxOptional, out)
//   group_idx_type 1 (per-group counts):                       aclnnGroupedBiasAddGradV2(gradY, groupIdxOptional,
//                                                                                         int64 groupIdxType, out)
// Both copy into a strided `out` themselves; kernels exist on Atlas A2/A3 and Ascend950 only (Ascend950 since
// 2026-03, and an older CANN had A2 only: there the launch fails with 561000, leaving `out` unwritten, which the
// probe turns into the CPU fallback), and V2 only from CANN 8.5: without V2, counts are turned into cumulative
// ends (from the validated host offsets) for V1.
// aclnn checks none of the group_idx values (and reads out of bounds on bad ones), so a host copy of group_idx
// is validated by the shared group_offsets() before the call. The A2/A3 and Ascend950 kernels zero-fill empty
// groups (ops-math arch32 unequal_c.h, arch35 cut_h.h / cut_gh.h; the second source audit, D.6), so only
// an empty grad_y gets a zero fill here (aclnn returns early then and leaves `out` untouched).
#include "npu/npu_common.h"

#include <vector>

namespace npu_ext {
namespace grouped_bias_add_grad_npu {  // this file's own: the unity build (setup.py) compiles the op files as one unit
namespace {

constexpr const char* kOp = "grouped_bias_add_grad";

// The probes: a 3-D grad_y without group_idx (no index values to set up), into a (G, H) out.
const npu::AclnnApi& api_v1() {
  static const npu::AclnnApi a(kOp, "aclnnGroupedBiasAddGrad", npu::SocNeed::A2A3Ascend950,
                               [](const npu::AclnnApi& api, c10::Device device) {
                                 at::Tensor gy = npu::probe_tensor(device, {1, 2, 16});
                                 c10::optional<at::Tensor> no_group_idx;
                                 at::Tensor out = npu::probe_tensor(device, {1, 16});
                                 return npu::probe_launch(api, gy, no_group_idx, out);
                               });
  return a;
}

const npu::AclnnApi& api_v2() {
  static const npu::AclnnApi a(kOp, "aclnnGroupedBiasAddGradV2", npu::SocNeed::A2A3Ascend950,
                               [](const npu::AclnnApi& api, c10::Device device) {
                                 at::Tensor gy = npu::probe_tensor(device, {1, 2, 16});
                                 c10::optional<at::Tensor> no_group_idx;
                                 int64_t type = 0;
                                 at::Tensor out = npu::probe_tensor(device, {1, 16});
                                 return npu::probe_launch(api, gy, no_group_idx, type, out);
                               });
  return a;
}
const bool kRegistered_api_v1 = npu::register_api(&api_v1);  // for the status report
const bool kRegistered_api_v2 = npu::register_api(&api_v2);  // for the status report

struct Validated {
  GroupedBiasAddGradMeta meta;
  std::vector<int64_t> offsets;  // G + 1 row offsets (with group_idx)
};

Validated validate(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type) {
  Validated v;
  v.meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  check_npu_float(kOp, "grad_y", grad_y);
  if (!group_idx.has_value()) return v;
  npu::check_not_capturing(kOp, "validating group_idx (aclnn checks none of its values)");
  v.offsets = group_offsets(kOp, "grad_y", group_idx->cpu(), group_idx_type, grad_y.size(0));
  return v;
}

void run(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type,
         const Validated& v, const at::Tensor& out) {
  if (out.numel() == 0) return;
  npu::OutSlot slot(out, npu::OutWrite::Strided, {grad_y});
  if (grad_y.numel() == 0) {
    slot.target().zero_();  // a sum over no rows; aclnn would leave out untouched
  } else {
    const bool counts = group_idx.has_value() && group_idx_type == 1;
    const c10::Device device = grad_y.device();
    const bool use_v2 = counts && (api_v2().available(device) || !api_v1().available(device));
    const npu::AclnnApi& api = use_v2 ? api_v2() : api_v1();
    npu::run_op(
        api, device,
        [&] {
          if (use_v2) {
            int64_t type = group_idx_type;
            npu::launch(api, grad_y, group_idx, type, slot.target());
          } else if (counts) {  // CANN without V2: the cumulative ends of the validated counts
            c10::optional<at::Tensor> ends = at::tensor(std::vector<int64_t>(v.offsets.begin() + 1, v.offsets.end()),
                                                        at::TensorOptions().dtype(at::kLong))
                                                 .to(grad_y.device());
            npu::launch(api, grad_y, ends, slot.target());
          } else {
            npu::launch(api, grad_y, group_idx, slot.target());
          }
        },
        [&] {
          static const auto cpu =
              npu::cpu_op<at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, int64_t)>(
                  "npu_ext::grouped_bias_add_grad");
          slot.target().copy_(cpu.call(grad_y.cpu(), npu::cpu_copy(group_idx), group_idx_type));
        });
  }
  slot.finish();
}

at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  const Validated v = validate(grad_y, group_idx, group_idx_type);
  c10::OptionalDeviceGuard guard(grad_y.device());
  at::Tensor out = new_output(v.meta.out, grad_y);
  run(grad_y, group_idx, group_idx_type, v, out);
  return out;
}

void grouped_bias_add_grad_out(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                               int64_t group_idx_type, const at::Tensor& out) {
  const Validated v = validate(grad_y, group_idx, group_idx_type);
  check_out(kOp, "out", out, v.meta.out, grad_y);
  c10::OptionalDeviceGuard guard(grad_y.device());
  run(grad_y, group_idx, group_idx_type, v, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("grouped_bias_add_grad", &grouped_bias_add_grad);
  m.impl("grouped_bias_add_grad.out", &grouped_bias_add_grad_out);
}

}  // namespace grouped_bias_add_grad_npu
}  // namespace npu_ext
