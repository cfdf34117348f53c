// The shared part of every NPU op (see npu_common.h): capability probing, the CPU fallback's warning, the
// rejection error, and the output slots.
#include "core/npu/aclnn.h"

#include <acl/acl.h>  // aclrtGetSocName, aclGetRecentErrMsg (libascendcl, a dependency of libtorch_npu)

#include "torch_npu/csrc/core/npu/NPUGraphsUtils.h"  // currentStreamCaptureStatusMayInitCtx (C10_NPU_API)
#include "torch_npu/csrc/core/npu/NPUStream.h"       // npuSynchronizeDevice (C10_NPU_API)

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <tuple>
#include <vector>

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

// torch_npu's SocVersion names (torch_npu/csrc/core/npu/NpuVariables.h: Ascend910B1..Ascend910B4_1 = A2,
// Ascend910_93xx = A3, Ascend950), plus the names older toolchains give Ascend950 chips: Ascend910_95xx (e.g.
// Ascend910_9579, Ascend910_9581, Ascend910_9589, Ascend910_9599; hexadecimal suffixes such as Ascend910_957c
// too). torch_npu's own logit_backward fallback condition (op-plugin LogitBackwardKernelOpApi.cpp) knows only the
// first three families.
SocFamily soc_family(const std::string& soc) {
  if (soc.empty()) return SocFamily::Unknown;
  if (starts_with(soc, "Ascend910B")) return SocFamily::A2;
  if (starts_with(soc, "Ascend910_93")) return SocFamily::A3;
  if (starts_with(soc, "Ascend950") || starts_with(soc, "Ascend910_95")) return SocFamily::Ascend950;
  return SocFamily::Other;
}

bool soc_supports(SocNeed need) {
  const SocFamily family = soc_family(soc_name());
  switch (need) {
    case SocNeed::Any:
      return family != SocFamily::Unknown;
    case SocNeed::A2A3Ascend950:
      return family == SocFamily::A2 || family == SocFamily::A3 || family == SocFamily::Ascend950;
  }
  return false;
}

AclnnApi::AclnnApi(const char* op, const char* name, SocNeed need, Probe probe, Fallback fallback)
    : op_(op), name_(name), probe_(probe), fallback_(fallback) {
  const std::string ws = std::string(name) + "GetWorkspaceSize";
  workspace_fn_ = compat::op_api_symbol(ws.c_str());
  run_fn_ = compat::op_api_symbol(name);
  if (workspace_fn_ == nullptr || run_fn_ == nullptr) {
    unavailable_ = std::string(name) + " is not in this CANN's operator libraries (" +
                   (workspace_fn_ == nullptr ? ws : std::string(name)) + " not found)";
  } else if (!soc_supports(need)) {
    unavailable_ = std::string(name) + " has no kernel for this SoC (" +
                   (soc_name().empty() ? std::string("unknown") : soc_name()) +
                   "; it needs an Atlas A2/A3 (Ascend910B*, Ascend910_93*) or Ascend950 (Ascend950*, Ascend910_95*))";
  }
}

bool AclnnApi::available(c10::Device device) const {
  if (!unavailable_.empty()) return false;
  const uint8_t state = state_[slot(device)].load(std::memory_order_acquire);
  if (state == kAvailable) return true;
  if (state == kNoKernel) return false;
  return probe_device(device);
}

bool AclnnApi::probe_device(c10::Device device) const {
  std::lock_guard<std::mutex> lock(probe_mu_);
  std::atomic<uint8_t>& state = state_[slot(device)];
  if (state.load(std::memory_order_relaxed) != kUnprobed) return state.load(std::memory_order_relaxed) == kAvailable;
  check_not_capturing(op_, ("the one-time probe of " + std::string(name_) + "'s kernel on this device").c_str());
  const ProbeResult r = probe_(*this, device);
  if (r.status == 0) {
    state.store(kAvailable, std::memory_order_release);
    return true;
  }
  const char* phase = r.phase == 1 ? "GetWorkspaceSize" : "'s launch";
  TORCH_CHECK(r.status >= 561000 && r.status < 562000, "npu_ext.", op_, ": the one-time probe call of ", name_,
              " (a small valid call, to find out whether this CANN has its kernel for this SoC) failed in ", name_,
              phase, " with status ", r.status, " (", status_name(r.status), "); this is a bug of npu_ext, "
              "please report it");
  no_kernel_[device.index()] = std::string(name_) + " has no kernel for this SoC (" +
                               (soc_name().empty() ? std::string("unknown") : soc_name()) +
                               ") in the installed CANN (a one-time probe call failed in " + name_ + phase +
                               " with status " + std::to_string(r.status) + ", " + status_name(r.status) + ")";
  state.store(kNoKernel, std::memory_order_release);
  return false;
}

std::string AclnnApi::unavailable(c10::Device device) const {
  if (!unavailable_.empty()) return unavailable_;
  std::lock_guard<std::mutex> lock(probe_mu_);
  const auto it = no_kernel_.find(device.index());
  return it == no_kernel_.end() ? std::string() : it->second;
}

void AclnnApi::before_cpu_fallback(const std::string& why) const {
  const char* env = std::getenv("NPU_EXT_NO_CPU_FALLBACK");
  TORCH_CHECK(env == nullptr || std::strcmp(env, "1") != 0, "npu_ext.", op_, ": ", why,
              ", and NPU_EXT_NO_CPU_FALLBACK=1 forbids running it on the CPU instead");
  static std::mutex mu;
  static std::set<std::string> warned;  // per operator (grouped_bias_add_grad has two entry points)
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu);
    first = warned.insert(op_).second;
  }
  if (first) {
    TORCH_WARN("npu_ext.", op_, ": ", why,
               "; running the CPU kernel on host copies instead (slow; warned once per operator; "
               "NPU_EXT_NO_CPU_FALLBACK=1 makes this an error)");
  }
}

std::string AclnnApi::describe() const {
  std::string line = std::string(op_) + ": " + name_;
  const char* fallback = fallback_ == Fallback::Cpu ? " -> CPU fallback" : " -> its composite of ATen ops on the NPU";
  if (!unavailable_.empty()) return line + ": " + unavailable_.substr(std::strlen(name_) + 1) + fallback;
  line += " found";
  std::lock_guard<std::mutex> lock(probe_mu_);
  bool probed = false;
  for (size_t d = 0; d < state_.size(); ++d) {
    const uint8_t state = state_[d].load(std::memory_order_acquire);
    if (state == kUnprobed) continue;
    probed = true;
    const int index = static_cast<int8_t>(d);  // slot() stores index -1 (a tensor without one) at 255
    line += "; device " + std::to_string(index) + ": " +
            (state == kAvailable ? std::string("kernel present, runs on the NPU")
                                 : no_kernel_[index].substr(std::strlen(name_) + 1) + fallback);
  }
  return probed ? line : line + "; its kernel is probed on the first call on each device";
}

namespace {
std::vector<ApiAccessor>& api_registry() {
  static std::vector<ApiAccessor> apis;
  return apis;
}
}  // namespace

bool register_api(ApiAccessor accessor) {
  api_registry().push_back(accessor);
  return true;
}

std::string status_report() {
  std::string soc = soc_name().empty() ? std::string("unknown") : soc_name();
  switch (soc_family(soc_name())) {
    case SocFamily::A2: soc += " (Atlas A2)"; break;
    case SocFamily::A3: soc += " (Atlas A3)"; break;
    case SocFamily::Ascend950: soc += " (Ascend950)"; break;
    default: break;
  }
  const char* env = std::getenv("NPU_EXT_NO_CPU_FALLBACK");
  const bool strict = env != nullptr && std::strcmp(env, "1") == 0;
  std::string out = "SoC: " + soc + "\naclnn calls: " + compat::aclnn_layer() + "\nCPU fallback: " +
                    (strict ? "an error (NPU_EXT_NO_CPU_FALLBACK=1)" : "allowed, warned once per operator");
  std::vector<std::string> lines;
  for (ApiAccessor api : api_registry()) lines.push_back(api().describe());
  std::sort(lines.begin(), lines.end());
  for (const auto& line : lines) out += "\n" + line;
  return out;
}

void synchronize_device() { c10_npu::npuSynchronizeDevice(true); }

bool forward_composite_forced() {  // read at every call (a getenv), so a process can compare the two
  const char* env = std::getenv("NPU_EXT_NPU_FORWARD");
  return env != nullptr && std::strcmp(env, "composite") == 0;
}

const at::Tensor& causal_mask(c10::Device device, int64_t s1, int64_t s2) {
  static std::mutex mu;
  // kept for the process and never destroyed: a static tensor's destructor could run after torch_npu's allocator
  static auto* masks = new std::map<std::tuple<int, int64_t, int64_t>, at::Tensor>();
  std::lock_guard<std::mutex> lock(mu);
  at::Tensor& mask = (*masks)[std::make_tuple(static_cast<int>(device.index()), s1, s2)];
  if (!mask.defined()) {
    mask = at::ones({1, 1, s1, s2}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
  }
  return mask;
}

void check_not_capturing(const char* op, const char* what) {
  TORCH_CHECK(c10_npu::currentStreamCaptureStatusMayInitCtx() == c10_npu::CaptureStatus::None, "npu_ext.", op, ": ",
              what, " needs the host, which is not possible while the NPU stream is being captured into a graph "
              "(aclgraph, torch.compile mode=\"reduce-overhead\"): call it outside the captured region");
}

const char* status_name(int status) {
  switch (status) {  // opbase include/nnopbase/opdev/op_errno.h
    case -1: return "no executor";
    case 161001: return "ACLNN_ERR_PARAM_NULLPTR";
    case 161002: return "ACLNN_ERR_PARAM_INVALID";
    case 361001: return "ACLNN_ERR_RUNTIME_ERROR";
    case 561000: return "ACLNN_ERR_INNER";
    case 561002: return "ACLNN_ERR_INNER_TILING_ERROR";
    case 561003: return "ACLNN_ERR_INNER_FIND_KERNEL_ERROR";
    case 561103: return "ACLNN_ERR_INNER_NULLPTR";
    default: return status >= 561000 && status < 562000 ? "ACLNN_ERR_INNER" : "aclnn error";
  }
}

void throw_rejected(const AclnnApi& api, int status, bool in_task) {
  const char* nothing = in_task ? "; nothing was launched (phase 1 ran in the queued task: TASK_QUEUE_ENABLE=2)"
                                : "; nothing was queued";
  TORCH_CHECK(status != compat::kConversionFailed, "npu_ext.", api.op(), ": an argument could not be converted for ",
              api.name(), ": ", compat::conversion_error(), nothing);
  TORCH_CHECK(status != 0, "npu_ext.", api.op(), ": ", api.name(),
              "GetWorkspaceSize returned status 0 but no executor", nothing);
  const char* msg = aclGetRecentErrMsg();
  TORCH_CHECK(false, "npu_ext.", api.op(), ": ", api.name(), "GetWorkspaceSize rejected the call with status ",
              status, " (", status_name(status), ")", nothing,
              (msg != nullptr && *msg != '\0') ? std::string(". aclnn says: ") + msg : std::string());
}

OutSlot::OutSlot(const at::Tensor& user, OutWrite write, std::initializer_list<at::Tensor> inputs,
                 c10::IntArrayRef aclnn_shape)
    : user_(user) {
  const bool shape_ok = aclnn_shape.empty() || aclnn_shape == user.sizes();
  // Dense writers are only right for a contiguous output (dense from its storage offset); strided writers
  // copy into any layout, except one where several elements share memory.
  bool direct = shape_ok && !compat::private_format(user) &&
                (write == OutWrite::Dense ? user.is_contiguous()
                                          : user.is_contiguous() || at::has_internal_overlap(user) != at::MemOverlap::Yes);
  for (const auto& in : inputs) {
    if (direct && in.defined() && in.is_alias_of(user) &&
        at::get_overlap_status(user, in) != at::MemOverlapStatus::No) {
      direct = false;  // aclnn would read an input it is overwriting
    }
  }
  direct_ = direct;
  target_ = direct ? user : empty(shape_ok ? user.sizes() : aclnn_shape, user.options());
}

void OutSlot::finish() {
  if (direct_) return;
  user_.copy_(target_.numel() == user_.numel() && target_.sizes() != user_.sizes() ? target_.view(user_.sizes())
                                                                                    : target_);
}

}  // namespace npu
}  // namespace npu_ext
