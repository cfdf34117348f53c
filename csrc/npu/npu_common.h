// What every csrc/npu source shares: ATen, the shared validation and ONE way to run an op on the NPU.
//
// Every NPU op has the same four steps, and the per-op file holds only what is specific to the op:
//   1. validate  - the shared check (common/checks.h) returns the full output spec, plus the NPU dtype guard;
//   2. outputs   - OutSlot: the caller's output itself when aclnn writes it correctly, else a contiguous
//                  temporary (aclnn ops that ignore strides, outputs overlapping an input, aclnn's own shapes);
//   3. call      - run_op(): aclnn through launch() when the entry point exists and the SoC supports it,
//                  else the CPU kernel on host copies (one warning; NPU_EXT_NO_CPU_FALLBACK=1 makes it an error);
//   4. copy-back - OutSlot::finish() copies a temporary into the caller's output.
//
// launch() is EXEC_NPU_CMD_EXT's V1 sequence (op-plugin op_api_common_base.h in torch_npu 2.13) with one
// difference: the GetWorkspaceSize status is CHECKED on the calling thread, so a call aclnn rejects raises a
// RuntimeError at the call ("npu_ext.<op>: aclnnXxxGetWorkspaceSize rejected ... status N"), instead of a null
// executor whose queued second phase fails later with 161001 at an unrelated operation. It uses only
// functions that header declares TORCH_NPU_API (exported by libtorch_npu.so): GetOpApiFuncAddr, ConvertTypes /
// ReleaseConvertTypes, InitExecCommonCtx, GetAclStream, hit_cache_ext, GetWorkSpaceAddr, RunAclCall (the
// task queue: OpCommand::RunOpApiV2), ExecuteApiFunc, InitExecSubTheadCtx, ReleaseExecCommonCtx,
// UnInitExecCommonCtx, plus c10_npu::GetDeterministicLevel / ApplyDeterministicLevel and aclrtGetSocName.
//
// The same sources compile against the real torch_npu headers (setup.py, tools/npu_compile_check.sh) and
// against the host stand-in in tests/npu_stub/include, which declares the same functions with the same
// contracts (tests/npu_stub/torch_npu_standin.cpp defines them, as libtorch_npu.so does).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>

#include "common/checks.h"
#include "op_plugin/include/npu_cpp_extension.h"

namespace npu_ext {
namespace npu {

// ---------------------------------------------------------------------------------------------------------
// Capability probing.

// Which SoCs have a kernel for an aclnn operator.
enum class SocNeed {
  Any,         // every NPU torch_npu supports (the op itself may still reject bf16 before A2: an error at the call)
  A2A3Ascend950,  // Atlas A2 (Ascend910B*), A3 (Ascend910_93*) and Ascend950 only
};

// aclrtGetSocName() as torch_npu reads it ("" when unknown).
const std::string& soc_name();
bool soc_supports(SocNeed need);

// One aclnn entry point (aclnnXxx + aclnnXxxGetWorkspaceSize), probed once, when first used: both symbols are
// looked up with torch_npu's GetOpApiFuncAddr (custom op libs, libopapi.so, then the aclnn feature libs), and
// the SoC is checked. `unavailable` says why the op cannot run on this machine (empty when it can).
class AclnnApi {
 public:
  AclnnApi(const char* op, const char* name, SocNeed need);
  const char* op() const { return op_; }
  const char* name() const { return name_; }
  void* workspace_fn() const { return workspace_fn_; }
  void* run_fn() const { return run_fn_; }
  bool available() const { return unavailable_.empty(); }
  const std::string& unavailable() const { return unavailable_; }
  // The one-time CPU-fallback warning, or the error when NPU_EXT_NO_CPU_FALLBACK=1.
  void before_cpu_fallback() const;

 private:
  const char* op_;
  const char* name_;
  void* workspace_fn_ = nullptr;
  void* run_fn_ = nullptr;
  std::string unavailable_;
  mutable std::once_flag warned_;
};

// ---------------------------------------------------------------------------------------------------------
// The call.

[[noreturn]] void throw_rejected(const AclnnApi& api, int status);

// Runs api with the given arguments (tensors, optional tensors, double, bool, int64_t, char*; lvalues).
// Phase 1 (GetWorkspaceSize) runs here and its status is checked; phase 2 goes through torch_npu's task
// queue (RunAclCall), exactly as EXEC_NPU_CMD_EXT's V1 path.
template <typename... Ts>
void launch(const AclnnApi& api, Ts&... args) {
  aclrtStream acl_stream = GetAclStream();
  const uint32_t level = c10_npu::GetDeterministicLevel();
  at_npu::native::ApplyDeterministicLevel(static_cast<int64_t>(level), at::globalContext().deterministicAlgorithms(),
                                          true);
  // torch_npu's executor cache: a hit queues the cached executor's phase 2 (it was accepted before). As in
  // op_api_common.h's EXEC_NPU_CMD_V1, the cache is looked up before the thread-local memory context is set up.
  if (hit_cache_ext(acl_stream, api.name(), api.run_fn(), level, args...)) return;
  InitExecCommonCtx();
  uint64_t workspace_size = 0;
  uint64_t* workspace_size_addr = &workspace_size;
  aclOpExecutor* executor = nullptr;
  aclOpExecutor** executor_addr = &executor;
  auto converted_params = ConvertTypes(args..., workspace_size_addr, executor_addr);
  auto get_workspace_size = ConvertToOpApiFunc(converted_params, api.workspace_fn());
  const int status = call(get_workspace_size, converted_params);
  if (status != 0 || executor == nullptr) {
    ReleaseConvertTypes(converted_params);
    UnInitExecCommonCtx();
    throw_rejected(api, status);
  }
  void* workspace_addr = GetWorkSpaceAddr(workspace_size);
  void* run_fn = api.run_fn();
  auto acl_call = [converted_params, workspace_addr, workspace_size, acl_stream, executor, run_fn]() -> int {
    InitExecSubTheadCtx(acl_stream);
    const int ret = ExecuteApiFunc(run_fn, acl_stream, workspace_addr, workspace_size, executor);
    ReleaseConvertTypes(converted_params);
    ReleaseExecCommonCtx();
    return ret;
  };
  RunAclCall(api.name(), acl_call);
  UnInitExecCommonCtx();
}

// Host work (a copy to the host, a CPU kernel) cannot be part of an NPU graph: during a capture (aclgraph,
// torch.compile mode="reduce-overhead") it would synchronise the captured stream, and a replay would not redo it.
// Raises "npu_ext.<op>: <what> ..." while the current stream is being captured.
void check_not_capturing(const char* op, const char* what);

// Step 3 of every op: aclnn when available, else the CPU kernel (cpu_fallback fills the slot targets from
// host copies of the inputs).
template <typename Aclnn, typename Cpu>
void run_op(const AclnnApi& api, Aclnn&& aclnn, Cpu&& cpu_fallback) {
  if (api.available()) {
    aclnn();
  } else {
    check_not_capturing(api.op(), ("the CPU fallback (" + api.unavailable() + ")").c_str());
    api.before_cpu_fallback();
    cpu_fallback();
  }
}

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
  // user's shape when empty). `inputs`: tensors of the call; an output sharing memory with one of them is
  // computed into a temporary.
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

// Host copy of an optional tensor.
inline c10::optional<at::Tensor> cpu_copy(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? c10::optional<at::Tensor>(t->cpu()) : c10::nullopt;
}

}  // namespace npu
}  // namespace npu_ext
