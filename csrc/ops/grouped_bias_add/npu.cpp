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
//
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
#include <ATen/OpMathType.h>

#include <array>
#include <vector>

#include "core/npu/aclnn.h"
#include "core/structured.h"
#include "ops/grouped_bias_add/checks.h"
#include "ops/grouped_bias_add/composite.h"

namespace npu_ext {
namespace grouped_bias_add_npu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
namespace {

constexpr const char* kOp = "grouped_bias_add";

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  check_npu_float(kOp, "x", x);
  if (npu::forward_composite_forced()) return composite::grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  c10::OptionalDeviceGuard guard;
  structured::make_current(guard, x.device());
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
}  // namespace forward

namespace backward {
namespace {

constexpr const char* kOp = "grouped_bias_add_grad";

// The probes: a 3-D grad_y without group_idx (no index values to set up), into a (G, H) out.
NPU_EXT_ACLNN(api_v1, kOp, aclnnGroupedBiasAddGrad, A2A3Ascend950, Cpu, zeros({1, 2, 16}), no_tensor(),
              zeros({1, 16}))

NPU_EXT_ACLNN(api_v2, kOp, aclnnGroupedBiasAddGradV2, A2A3Ascend950, Cpu, zeros({1, 2, 16}), no_tensor(),
              int64_t{0}, zeros({1, 16}))

// group_idx's values checked (aclnn checks none): its G + 1 row offsets.
std::vector<int64_t> offsets_of(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                int64_t group_idx_type) {
  if (!group_idx.has_value()) return {};
  npu::check_not_capturing(kOp, "validating group_idx (aclnn checks none of its values)");
  return group_offsets(kOp, "grad_y", group_idx->cpu(), group_idx_type, grad_y.size(0));
}

void run(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type,
         const at::Tensor& out) {
  const std::vector<int64_t> offsets = offsets_of(grad_y, group_idx, group_idx_type);
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
            c10::optional<at::Tensor> ends = at::tensor(std::vector<int64_t>(offsets.begin() + 1, offsets.end()),
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

// Both overloads (core/structured.h: the check and the outputs come from GroupedBiasAddGradOp).
struct Kernel : npu::StructuredKernel {
  static void check(const at::Tensor& grad_y, const c10::optional<at::Tensor>&, int64_t) {
    check_npu_float(kOp, "grad_y", grad_y);
  }
  static void run(const GroupedBiasAddGradMeta&, const std::array<at::Tensor, 1>& outs, const at::Tensor& grad_y,
                  const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type) {
    backward::run(grad_y, group_idx, group_idx_type, outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, PrivateUse1, m) {
  m.impl("grouped_bias_add", &forward::grouped_bias_add);
  structured::impl<GroupedBiasAddGradOp, backward::Kernel>(m);
}

}  // namespace grouped_bias_add_npu
}  // namespace npu_ext
