// The shared part of every NPU op (see npu_common.h): capability probing, the CPU fallback's warning, the
// rejection error, and the output slots.
#include "npu/npu_common.h"

#include <acl/acl_rt.h>  // aclrtGetSocName, aclGetRecentErrMsg (libascendcl, a dependency of libtorch_npu)

#include "torch_npu/csrc/core/npu/NPUGraphsUtils.h"  // currentStreamCaptureStatusMayInitCtx (C10_NPU_API)

#include <ATen/MemoryOverlap.h>

#include <cstdlib>
#include <cstring>

namespace npu_ext {
namespace npu {

const std::string& soc_name() {
  static const std::string name = [] {
    const char* n = aclrtGetSocName();
    return std::string(n == nullptr ? "" : n);
  }();
  return name;
}

namespace {
bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

// The SoC names torch_npu maps to SocVersion Ascend910B1..Ascend910B4_1 (A2), Ascend910_93xx (A3) and
// Ascend950 (torch_npu/csrc/core/npu/NpuVariables.h). torch_npu's own logit_backward fallback condition
// (op-plugin LogitBackwardKernelOpApi.cpp) accepts exactly these families.
bool soc_supports(SocNeed need) {
  const std::string& soc = soc_name();
  switch (need) {
    case SocNeed::Any:
      return !soc.empty();
    case SocNeed::A2A3Ascend950:
      return starts_with(soc, "Ascend910B") || starts_with(soc, "Ascend910_93") || starts_with(soc, "Ascend950");
  }
  return false;
}

AclnnApi::AclnnApi(const char* op, const char* name, SocNeed need) : op_(op), name_(name) {
  const std::string ws = std::string(name) + "GetWorkspaceSize";
  workspace_fn_ = GetOpApiFuncAddr(ws.c_str());
  run_fn_ = GetOpApiFuncAddr(name);
  if (workspace_fn_ == nullptr || run_fn_ == nullptr) {
    unavailable_ = std::string(name) + " is not in this CANN's operator libraries (" +
                   (workspace_fn_ == nullptr ? ws : std::string(name)) + " not found)";
  } else if (!soc_supports(need)) {
    unavailable_ = std::string(name) + " has no kernel for this SoC (" +
                   (soc_name().empty() ? std::string("unknown") : soc_name()) +
                   "; it needs an Atlas A2/A3 (Ascend910B*, Ascend910_93*) or Ascend950)";
  }
}

void AclnnApi::before_cpu_fallback() const {
  const char* env = std::getenv("NPU_EXT_NO_CPU_FALLBACK");
  TORCH_CHECK(env == nullptr || std::strcmp(env, "1") != 0, "npu_ext.", op_, ": ", unavailable_,
              ", and NPU_EXT_NO_CPU_FALLBACK=1 forbids running it on the CPU instead");
  std::call_once(warned_, [this] {
    TORCH_WARN("npu_ext.", op_, ": ", unavailable_,
               "; running the CPU kernel on host copies instead (slow; warned once per operator; "
               "NPU_EXT_NO_CPU_FALLBACK=1 makes this an error)");
  });
}

void check_not_capturing(const char* op, const char* what) {
  TORCH_CHECK(c10_npu::currentStreamCaptureStatusMayInitCtx() == c10_npu::CaptureStatus::None, "npu_ext.", op, ": ",
              what, " needs the host, which is not possible while the NPU stream is being captured into a graph "
              "(aclgraph, torch.compile mode=\"reduce-overhead\"): call it outside the captured region");
}

namespace {
const char* status_name(int status) {
  switch (status) {
    case 161001: return "ACLNN_ERR_PARAM_NULLPTR";
    case 161002: return "ACLNN_ERR_PARAM_INVALID";
    case 361001: return "ACLNN_ERR_RUNTIME_ERROR";
    default: return status >= 561000 && status < 562000 ? "ACLNN_ERR_INNER" : "aclnn error";
  }
}
}  // namespace

void throw_rejected(const AclnnApi& api, int status) {
  TORCH_CHECK(status != 0, "npu_ext.", api.op(), ": ", api.name(),
              "GetWorkspaceSize returned status 0 but no executor; nothing was queued");
  const char* msg = aclGetRecentErrMsg();
  TORCH_CHECK(false, "npu_ext.", api.op(), ": ", api.name(), "GetWorkspaceSize rejected the call with status ",
              status, " (", status_name(status), "); nothing was queued",
              (msg != nullptr && *msg != '\0') ? std::string(". aclnn says: ") + msg : std::string());
}

OutSlot::OutSlot(const at::Tensor& user, OutWrite write, std::initializer_list<at::Tensor> inputs,
                 c10::IntArrayRef aclnn_shape)
    : user_(user) {
  const bool shape_ok = aclnn_shape.empty() || aclnn_shape == user.sizes();
  // Dense writers are only right for a contiguous output (dense from its storage offset); strided writers
  // copy into any layout, except one where several elements share memory.
  bool direct = shape_ok && (write == OutWrite::Dense ? user.is_contiguous()
                                                      : at::has_internal_overlap(user) != at::MemOverlap::Yes);
  for (const auto& in : inputs) {
    if (direct && in.defined() && in.is_alias_of(user) &&
        at::get_overlap_status(user, in) != at::MemOverlapStatus::No) {
      direct = false;  // aclnn would read an input it is overwriting
    }
  }
  direct_ = direct;
  target_ = direct ? user : at::empty(shape_ok ? user.sizes() : aclnn_shape, user.options());
}

void OutSlot::finish() {
  if (direct_) return;
  user_.copy_(target_.numel() == user_.numel() && target_.sizes() != user_.sizes() ? target_.view(user_.sizes())
                                                                                    : target_);
}

}  // namespace npu
}  // namespace npu_ext
