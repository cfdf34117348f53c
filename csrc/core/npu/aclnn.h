// What every NPU launch (csrc/ops/<family>/npu.cpp) shares: ATen, the checks and ONE way to run an op on the NPU.
//
// Every NPU op has the same four steps, and the per-op file holds only what is specific to the op:
//   1. validate  - the family's check (ops/<family>/checks.h) returns the full output spec, plus the NPU dtype guard;
//   2. outputs   - OutSlot: the caller's output itself when aclnn writes it correctly, else a contiguous
//                  temporary (aclnn ops that ignore strides, outputs overlapping an input, aclnn's own shapes);
//   3. call      - run_op(): aclnn through launch() when the entry point exists, the SoC is one the operator
//                  supports and a one-time probe call on the device found its kernel, else the CPU kernel on
//                  host copies (one warning; NPU_EXT_NO_CPU_FALLBACK=1 makes it an error);
//   4. copy-back - OutSlot::finish() copies a temporary into the caller's output.
//
// launch() is torch_npu's own aclnn sequence (EXEC_NPU_CMD_EXT) with one difference: the GetWorkspaceSize status
// is CHECKED on the calling thread, so a call aclnn rejects raises a RuntimeError at the call ("npu_ext.<op>:
// aclnnXxxGetWorkspaceSize rejected ... status N"), instead of a null executor whose queued second phase fails
// later with 161001 at an unrelated operation. Every torch_npu-release difference of that sequence is in
// core/npu/torch_npu_compat.h (op-plugin's exported extension API where the release's headers ship it, CANN's C
// API with torch_npu's task queue elsewhere: 2.6 and 2.7.1's first .postN). Besides it, this code uses only what every release from 2.6 to 2.14 exports:
// c10_npu::npuSynchronizeDevice, c10_npu::currentStreamCaptureStatusMayInitCtx, aclrtGetSocName and
// aclGetRecentErrMsg.
//
// The same sources compile against the real torch_npu headers (setup.py, tools/npu_compile_check.sh) and
// against the host stand-in in tests/npu_stub/include, which declares the same functions with the same
// contracts (tests/npu_stub/torch_npu_standin.cpp defines them, as libtorch_npu.so does).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/checks.h"
#include "core/structured.h"
#include "core/npu/torch_npu_compat.h"

namespace npu_ext {
namespace npu {

// ---------------------------------------------------------------------------------------------------------
// Capability probing.

// Which SoCs have a kernel for an aclnn operator.
enum class SocNeed {
  Any,         // every NPU torch_npu supports (the op itself may still reject bf16 before A2: an error at the call)
  A2A3Ascend950,  // Atlas A2 (Ascend910B*), A3 (Ascend910_93*) and Ascend950 only
};

// The SoC families the operators' kernel configs name, from the name aclrtGetSocName() reports. Ascend950 chips
// are "Ascend950PR_*" / "Ascend950DT_*", and "Ascend910_95*" (e.g. Ascend910_9579, Ascend910_9589) in older
// toolchains: the same SocVersion (opbase platform.h: ASCEND950 = ASCEND910_95).
enum class SocFamily { Unknown, A2, A3, Ascend950, Other };
SocFamily soc_family(const std::string& soc_name);

// aclrtGetSocName() as torch_npu reads it ("" when unknown).
const std::string& soc_name();
bool soc_supports(SocNeed need);

class AclnnApi;

// What a probe call did: status 0 when both phases ran; else the failing status and its phase (1: GetWorkspaceSize,
// with status -1 when it returned 0 but no executor; 2: the queued launch).
struct ProbeResult {
  int status = 0;
  int phase = 0;
};

// What runs when an operator's kernel is unavailable: the CPU kernel on host copies (the backward ops), or the
// op's composite of ATen ops on the device itself (the forward ops, whose native kernel is an optimisation:
// NPU_EXT_NO_CPU_FALLBACK does not forbid it, and nothing is warned).
enum class Fallback { Cpu, Composite };

// One aclnn entry point (aclnnXxx + aclnnXxxGetWorkspaceSize). Both symbols are looked up once, when first used,
// with torch_npu's GetOpApiFuncAddr (custom op libs, libopapi.so, then the aclnn feature libs), and the SoC is
// checked. Then, once per device, `probe` runs one tiny valid call of the entry point through both phases and
// synchronises (probe_launch): a CANN can have the entry point but no kernel for this SoC (a config added later,
// e.g. the Ascend950 ones of LogitGrad, ScaledMaskedSoftmaxGradV2 and GroupedBiasAddGrad in 2026; older
// GroupedBiasAddGrad had A2 only). The generated operators then fail phase 1 with 561003
// (ACLNN_ERR_INNER_FIND_KERNEL_ERROR); the hand-written GroupedBiasAddGrad passes phase 1 and fails its launch
// with 561000, reported later by the task queue with the output unwritten. Any 561xxx (ACLNN_ERR_INNER*) from
// the probe makes the operator unavailable on that device, like a missing entry point; another failing status
// is a bug of the probe and raises.
class AclnnApi {
 public:
  using Probe = ProbeResult (*)(const AclnnApi& api, c10::Device device);
  AclnnApi(const char* op, const char* name, SocNeed need, Probe probe, Fallback fallback = Fallback::Cpu);
  const char* op() const { return op_; }
  const char* name() const { return name_; }
  void* workspace_fn() const { return workspace_fn_; }
  void* run_fn() const { return run_fn_; }
  // Whether the operator runs on `device` (probed on the first call there; the probe needs the host, so it
  // raises while the stream is being captured into a graph).
  bool available(c10::Device device) const;
  // Why it does not (after available(device) returned false).
  std::string unavailable(c10::Device device) const;
  // The CPU-fallback warning (once per operator), or the error when NPU_EXT_NO_CPU_FALLBACK=1.
  void before_cpu_fallback(const std::string& why) const;
  // One line for the status report: the entry point found or not, the SoC, and per device what the probe
  // found ("not probed yet" before the first call there). Never probes.
  std::string describe() const;

 private:
  enum State : uint8_t { kUnprobed = 0, kAvailable = 1, kNoKernel = 2 };
  bool probe_device(c10::Device device) const;
  static size_t slot(c10::Device device) { return static_cast<uint8_t>(device.index()); }

  const char* op_;
  const char* name_;
  Probe probe_;
  Fallback fallback_;
  void* workspace_fn_ = nullptr;
  void* run_fn_ = nullptr;
  std::string unavailable_;  // symbols or SoC: the same on every device
  mutable std::array<std::atomic<uint8_t>, 256> state_{};  // per device index
  mutable std::mutex probe_mu_;
  mutable std::map<int, std::string> no_kernel_;  // per device index, under probe_mu_
};

// Every entry point the NPU path can call, for the status report (npu_ext::_npu_status, core/npu/status.cpp;
// shown by `python -m torch_ext`). Each op file registers the accessors of its AclnnApi objects at load time;
// the objects themselves are still made on first use.
using ApiAccessor = const AclnnApi& (*)();
bool register_api(ApiAccessor accessor);
std::string status_report();

// ---------------------------------------------------------------------------------------------------------
// The call.

// `in_task`: phase 1 ran inside the queued task (TASK_QUEUE_ENABLE=2), where the message reaches the caller at the
// next synchronisation.
[[noreturn]] void throw_rejected(const AclnnApi& api, int status, bool in_task = false);

// A status's name (op_errno.h), for messages.
const char* status_name(int status);

// Waits until every queued task has run (torch_npu's task queue and the device): c10_npu::npuSynchronizeDevice.
void synchronize_device();

namespace detail {
// Phase 1 (GetWorkspaceSize) on the calling thread; when it returns an executor, phase 2 is queued on torch_npu's
// task queue, and `report(status)` inside the queued task turns phase 2's status into what the task reports to
// the queue. Returns phase 1's status; `queued` says whether phase 2 was queued. How, on each torch_npu release
// (op-plugin's extension API with torch_npu's executor cache, or CANN's C API on 2.6): npu/torch_npu_compat.h.
// With TASK_QUEUE_ENABLE=2 (torch_npu 2.7.1.post4 and later) phase 1 runs inside the queued task too, and
// `reject(status)` there turns a failed phase 1 into what the task reports (queued is then true, the status 0).
template <typename Report, typename Reject, typename... Ts>
int queue_call(const AclnnApi& api, bool& queued, Report report, Reject reject, Ts&... args) {
  return compat::queue_aclnn(api.name(), api.workspace_fn(), api.run_fn(), queued, report, reject, args...);
}

// An argument as aclnn gets it: a tensor in a private storage format cast to its base format (compat::base_format),
// anything else as it is.
inline at::Tensor base_format_arg(const at::Tensor& t) { return compat::base_format(t); }
inline c10::optional<at::Tensor> base_format_arg(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? c10::optional<at::Tensor>(compat::base_format(*t)) : t;
}
template <typename T>
T base_format_arg(const T& value) {
  return value;
}
}  // namespace detail

// Runs api with the given arguments (tensors, optional tensors, double, bool, int64_t, char*; lvalues).
// Input tensors in a private storage format (FRACTAL_NZ, NC1HWC0, ...) are cast to their base format first, as
// torch_npu's acl_op route would (compat::base_format); outputs are base-format tensors already (OutSlot).
// Phase 1 (GetWorkspaceSize) runs here and its status is checked; phase 2 goes through torch_npu's task
// queue (RunAclCall), exactly as EXEC_NPU_CMD_EXT's V1 path. With TASK_QUEUE_ENABLE=2 (where torch_npu ships
// op-plugin's extension API) both run in the queued task, as its V2 path: a rejection then raises at the next
// synchronisation (torch_npu's report names the aclnn operator; its log has this message).
template <typename... Ts>
void launch(const AclnnApi& api, Ts&... args) {
  auto based = std::make_tuple(detail::base_format_arg(args)...);
  bool queued = false;
  const AclnnApi* a = &api;  // a function-local static: outlives the queued task
  const int status = std::apply(
      [&](auto&... arg) {
        return detail::queue_call(
            api, queued, [](int ret) { return ret; },
            [a](int rejected) -> int { throw_rejected(*a, rejected, true); }, arg...);
      },
      based);
  if (!queued) throw_rejected(api, status);
}

// A zero-filled tensor for a probe call.
inline at::Tensor probe_tensor(c10::Device device, at::IntArrayRef shape, at::ScalarType dtype = at::kFloat) {
  return at::zeros(shape, at::TensorOptions().dtype(dtype).device(device));
}

// An AclnnApi probe's call: launch()'s sequence, synchronised; the phase-2 status is caught inside the queued
// task, which reports success to the queue, so nothing fails later at an unrelated operation.
template <typename... Ts>
ProbeResult probe_launch(const AclnnApi& api, Ts&... args) {
  auto phase2 = std::make_shared<std::atomic<int>>(0);
  auto phase1 = std::make_shared<std::atomic<int>>(0);  // phase 1's status when it ran in the task (mode 2)
  bool queued = false;
  const int status = detail::queue_call(
      api, queued,
      [phase2](int ret) {
        phase2->store(ret);
        return 0;
      },
      [phase1](int rejected) {
        phase1->store(rejected == 0 ? -1 : rejected);
        return 0;
      },
      args...);
  if (!queued) return {status == 0 ? -1 : status, 1};  // -1: status 0 but no executor
  synchronize_device();
  if (phase1->load() != 0) return {phase1->load(), 1};
  const int ret = phase2->load();
  return {ret, ret == 0 ? 0 : 2};
}

// A new contiguous NPU tensor in the base format ND (an output, a temporary): torch_npu's own allocation where the
// release exports it, else at::empty (compat::empty).
inline at::Tensor empty(c10::IntArrayRef sizes, const at::TensorOptions& options) {
  return compat::empty(sizes, options);
}

// Host work (a copy to the host, a CPU kernel) cannot be part of an NPU graph: during a capture (aclgraph,
// torch.compile mode="reduce-overhead") it would synchronise the captured stream, and a replay would not redo it.
// Raises "npu_ext.<op>: <what> ..." while the current stream is being captured.
void check_not_capturing(const char* op, const char* what);

// Step 3 of every op: aclnn when available on `device`, else the CPU kernel (cpu_fallback fills the slot targets
// from host copies of the inputs).
template <typename Aclnn, typename Cpu>
void run_op(const AclnnApi& api, c10::Device device, Aclnn&& aclnn, Cpu&& cpu_fallback) {
  if (api.available(device)) {
    aclnn();
    return;
  }
  const std::string why = api.unavailable(device);
  check_not_capturing(api.op(), ("the CPU fallback (" + why + ")").c_str());
  api.before_cpu_fallback(why);
  cpu_fallback();
}

// Step 3 of a forward op: its native aclnn kernel when available on `device`, else its composite of ATen ops on
// the device (ops/<family>/composite.cpp, compiled into this module too). NPU_EXT_NPU_FORWARD=composite
// takes the composite always (to compare the two; benchmarks/npu.py).
bool forward_composite_forced();

template <typename Aclnn, typename Composite>
auto run_native(const AclnnApi& api, c10::Device device, Aclnn&& aclnn, Composite&& composite) {
  if (!forward_composite_forced() && api.available(device)) return aclnn();
  return composite();
}

// run_native for a forward op whose output is like its input `self` (sizes, dtype, device), on self's device:
// launch(y) writes y with the aclnn kernel, called only when y has elements.
template <typename Launch, typename Composite>
at::Tensor run_elementwise(const AclnnApi& api, const at::Tensor& self, Launch&& launch, Composite&& composite) {
  c10::OptionalDeviceGuard guard;
  structured::make_current(guard, self.device());
  return run_native(
      api, self.device(),
      [&] {
        at::Tensor y = empty(self.sizes(), self.options());
        if (y.numel() != 0) launch(y);
        return y;
      },
      composite);
}

// What every NPU backend of a structured op (core/structured.h) shares: the inputs' device made current, and the
// functional overload's outputs allocated with npu::empty (symbolic sizes, which no NPU call has, through
// new_output).
struct StructuredKernel {
  static constexpr bool kDeviceGuard = true;
  static at::Tensor new_output(const OutputSpec& spec, const at::Tensor& like) {
    if (const auto sizes = c10::asIntArrayRefSlowOpt(spec.shape)) return empty(*sizes, like.options().dtype(spec.dtype));
    return ::npu_ext::new_output(spec, like);
  }
};

// The causal mask (true above the diagonal: column > row) of shape [1, 1, s1, s2] as a bool tensor on `device`,
// built once per device and shape and kept (aclnnScaledMaskedSoftmax(Backward) reject fixTriuMask=true).
const at::Tensor& causal_mask(c10::Device device, int64_t s1, int64_t s2);

// The CPU kernel of an npu_ext op, called through the dispatcher on host tensors.
template <typename Sig>
c10::TypedOperatorHandle<Sig> cpu_op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Sig>();
}

// ---------------------------------------------------------------------------------------------------------
// Outputs.

// How an aclnn operator writes its output (CANN ops-nn sources).
enum class OutWrite {
  Strided,  // made contiguous internally and copied into the output honouring its strides (l0op::ViewCopy)
  Dense,    // written densely from the output's storage offset, its strides ignored (no copy-back)
};

// The tensor aclnn writes for one caller-visible output, and the copy back into it.
class OutSlot {
 public:
  // `user`: the caller's (or a freshly allocated) output. `aclnn_shape`: the shape aclnn wants for it (the
  // user's shape when empty). `inputs`: tensors of the call; an output sharing memory with one of them, or in
  // a private storage format (aclnn writes base formats), is computed into a temporary.
  OutSlot(const at::Tensor& user, OutWrite write, std::initializer_list<at::Tensor> inputs,
          c10::IntArrayRef aclnn_shape = {});
  at::Tensor& target() { return target_; }
  const at::Tensor& user() const { return user_; }
  bool direct() const { return direct_; }
  void finish();  // copies the temporary back (a no-op when aclnn wrote the user's tensor)

 private:
  at::Tensor user_;
  at::Tensor target_;
  bool direct_;
};

// ---------------------------------------------------------------------------------------------------------
// Declaring an entry point.

// The arguments of a probe call, written in the declaration and made on the probed device: zeros(shape[, dtype])
// for a tensor, no_tensor() for an absent optional tensor, text("...") for a host C string; a double, bool or
// int64_t as it is.
struct ProbeZeros {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};
inline ProbeZeros zeros(std::initializer_list<int64_t> shape, at::ScalarType dtype = at::kFloat) {
  return {std::vector<int64_t>(shape), dtype};
}
struct ProbeNoTensor {};
inline ProbeNoTensor no_tensor() { return {}; }
struct ProbeText {
  const char* text;
};
inline ProbeText text(const char* s) { return {s}; }

namespace detail {
inline at::Tensor make_probe_arg(const ProbeZeros& z, c10::Device device) {
  return probe_tensor(device, z.shape, z.dtype);
}
inline c10::optional<at::Tensor> make_probe_arg(const ProbeNoTensor&, c10::Device) { return c10::nullopt; }
inline char* make_probe_arg(const ProbeText& t, c10::Device) { return const_cast<char*>(t.text); }  // read only
template <typename T>
T make_probe_arg(const T& value, c10::Device) {
  return value;
}
}  // namespace detail

// One probe call of api with the declared arguments made on `device`.
template <typename... Ts>
ProbeResult probe_with(const AclnnApi& api, c10::Device device, const Ts&... declared) {
  auto args = std::make_tuple(detail::make_probe_arg(declared, device)...);
  return std::apply([&](auto&... a) { return probe_launch(api, a...); }, args);
}

}  // namespace npu

// NPU_EXT_ACLNN(accessor, "op", aclnnName, SocNeed, Fallback, probe arguments...): the aclnn entry point aclnnName
// (and aclnnNameGetWorkspaceSize) as `accessor()`, made on first use, with the probe call that finds whether a
// device has its kernel (AclnnApi) and its line in the status report (registered at load time). The probe arguments
// are one small valid call: zeros({16}), no_tensor(), text("none"), 1.0, false, int64_t{0}, ...
#define NPU_EXT_ACLNN(accessor, op, name, need, fallback, ...)                                                  \
  const ::npu_ext::npu::AclnnApi& accessor() {                                                                    \
    using namespace ::npu_ext::npu;                                                                               \
    static const AclnnApi api(op, #name, SocNeed::need,                                                           \
                              [](const AclnnApi& a, c10::Device device) { return probe_with(a, device, __VA_ARGS__); }, \
                              Fallback::fallback);                                                                \
    return api;                                                                                                   \
  }                                                                                                               \
  const bool C10_ANONYMOUS_VARIABLE(npu_ext_aclnn_registered_) = ::npu_ext::npu::register_api(&accessor);

namespace npu {

// Host copy of an optional tensor.
inline c10::optional<at::Tensor> cpu_copy(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? c10::optional<at::Tensor>(t->cpu()) : c10::nullopt;
}

}  // namespace npu
}  // namespace npu_ext
