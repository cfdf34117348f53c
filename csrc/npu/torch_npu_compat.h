// Every difference between the torch_npu releases _C_npu builds against (2.6.0 to 2.14.0), in one place: how an
// aclnn operator is looked up and queued. npu_common.h's launch() and probe_launch() call queue_aclnn() below
// and nothing else of torch_npu's aclnn machinery; no op file tests a torch_npu version.
//
// NPU_EXT_TORCH_NPU_VERSION (major * 100 + minor, e.g. 213) is set by setup.py from the installed torch_npu.
//
// Two ways to call aclnn, chosen by what the release exports:
//
//  * torch_npu 2.7.1 and later export op-plugin's extension API (op_plugin/include/npu_cpp_extension.h, the
//    functions torch_npu's own EXEC_NPU_CMD uses): the aclnn lookup (GetOpApiFuncAddr), the argument conversion,
//    the thread-local memory context, torch_npu's executor cache, its deterministic setting, its workspace and its
//    task queue (RunAclCall). queue_aclnn() runs their sequence as that release's EXEC_NPU_CMD_V1_EXT macro does,
//    with one difference: phase 1's status is checked on the calling thread (npu_common.h). Two steps differ
//    between releases:
//      - 2.13 and later: the deterministic LEVEL (c10_npu::GetDeterministicLevel, applied with
//        at_npu::native::ApplyDeterministicLevel before the cache lookup), and hit_cache_ext takes that level;
//      - 2.7.1 to 2.12: SetExecConfig() applies torch.use_deterministic_algorithms after the cache lookup, and
//        hit_cache_ext has no level parameter (a level passed there would be hashed as the first op argument).
//    Using the exported API keeps the extension's calls in torch_npu's cache, memory context and deterministic
//    state exactly as torch_npu's own operators are.
//
//  * torch_npu 2.6 exports none of it (its op_plugin include folder has ops.h alone; GetOpApiFuncAddr,
//    ConvertTypes, InitExecCommonCtx and RunAclCall are internal to libtorch_npu.so). There the call is made
//    with CANN's C API and the torch_npu API every release exports: the operators are looked up in CANN's
//    libraries with dlopen/dlsym (custom operator packages first, then libopapi.so, as op-plugin does), the
//    arguments converted with nnopbase's aclCreateTensor & co. (resolved in the same libraries), the memory
//    context is nnopbase's InitHugeMemThreadLocal / UnInitHugeMemThreadLocal / ReleaseHugeMem when the CANN has
//    them, the workspace is a byte tensor of torch_npu's caching allocator kept alive by the queued task,
//    torch.use_deterministic_algorithms is applied with aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC) (what
//    torch_npu's internal SetDeterministic does), and phase 2 goes through torch_npu's task queue with
//    at_npu::native::OpCommand::RunOpApiV2 (exported by every release from 2.1 to 2.14). No executor cache: the
//    nnopbase cache interface torch_npu uses is internal. MindSpeed's own aclnn layer (ACLNN_CMD in
//    mindspeed/ops/csrc/cann/inc/aclnn_common.h) calls aclnn on these releases the same way.
//
// Why not the second way everywhere: on 2.7.1 and later the exported API is what torch_npu's own operators use,
// so the extension's calls share their executor cache (no phase 1 on a repeated call), their deterministic level
// (2.13: levels beyond on/off) and their memory context. Why not only the first: 2.6 does not have it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#ifndef NPU_EXT_TORCH_NPU_VERSION
#error "NPU_EXT_TORCH_NPU_VERSION (torch_npu major * 100 + minor) must be defined by the build (setup.py)"
#endif

#if NPU_EXT_TORCH_NPU_VERSION >= 207
#include "op_plugin/include/npu_cpp_extension.h"
#else
#include <acl/acl_rt.h>  // aclrtStream

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#endif

namespace npu_ext {
namespace npu {
namespace compat {

// An aclnn function (entry point or nnopbase object API) by name, or nullptr.
void* op_api_symbol(const char* name);

// How queue_aclnn() calls aclnn on this torch_npu, for the status report.
const char* aclnn_layer();

#if NPU_EXT_TORCH_NPU_VERSION >= 207

// Phase 1 on the calling thread; when it returns an executor, phase 2 is queued on torch_npu's task queue and
// `report(status)` inside the queued task turns phase 2's status into what the task reports to the queue. A hit
// of torch_npu's executor cache queues the cached executor's phase 2 (accepted before) without `report`. Returns
// phase 1's status; `queued` says whether phase 2 was queued.
template <typename Report, typename... Ts>
int queue_aclnn(const char* name, void* workspace_fn, void* run_fn, bool& queued, Report report, Ts&... args) {
  queued = false;
#if NPU_EXT_TORCH_NPU_VERSION >= 213
  aclrtStream acl_stream = GetAclStream();
  const uint32_t level = c10_npu::GetDeterministicLevel();
  at_npu::native::ApplyDeterministicLevel(static_cast<int64_t>(level), at::globalContext().deterministicAlgorithms(),
                                          true);
  if (hit_cache_ext(acl_stream, name, run_fn, level, args...)) {  // looked up before the memory context
    queued = true;
    return 0;
  }
  InitExecCommonCtx();
#else
  InitExecCommonCtx();
  aclrtStream acl_stream = GetAclStream();
  if (hit_cache_ext(acl_stream, name, run_fn, args...)) {
    queued = true;
    return 0;
  }
  SetExecConfig();  // torch.use_deterministic_algorithms
#endif
  uint64_t workspace_size = 0;
  uint64_t* workspace_size_addr = &workspace_size;
  aclOpExecutor* executor = nullptr;
  aclOpExecutor** executor_addr = &executor;
  auto converted_params = ConvertTypes(args..., workspace_size_addr, executor_addr);
  auto get_workspace_size = ConvertToOpApiFunc(converted_params, workspace_fn);
  const int status = call(get_workspace_size, converted_params);
  if (status != 0 || executor == nullptr) {
    ReleaseConvertTypes(converted_params);
    UnInitExecCommonCtx();
    return status;
  }
  void* workspace_addr = GetWorkSpaceAddr(workspace_size);
  auto acl_call = [converted_params, workspace_addr, workspace_size, acl_stream, executor, run_fn, report]() -> int {
    InitExecSubTheadCtx(acl_stream);
    const int ret = ExecuteApiFunc(run_fn, acl_stream, workspace_addr, workspace_size, executor);
    ReleaseConvertTypes(converted_params);
    ReleaseExecCommonCtx();
    return report(ret);
  };
  RunAclCall(name, acl_call);
  UnInitExecCommonCtx();
  queued = true;
  return 0;
}

#else  // torch_npu 2.6: CANN's C API and OpCommand::RunOpApiV2

struct aclOpExecutor;
struct aclTensor;

namespace portable {

aclTensor* convert(const at::Tensor& t);
void release(aclTensor* t);
void apply_deterministic();  // aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC) when the setting changed
void mem_ctx_init();         // nnopbase's thread-local memory context, when the CANN has it
void mem_ctx_uninit();
void mem_release();
aclrtStream current_stream();
at::Tensor workspace(uint64_t size);  // on the current NPU device, from torch_npu's caching allocator
void enqueue(const char* name, const std::function<int()>& task);  // OpCommand::RunOpApiV2

inline aclTensor* convert_arg(const at::Tensor& t) { return t.defined() ? convert(t) : nullptr; }
inline aclTensor* convert_arg(const c10::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? convert(*t) : nullptr;
}
template <typename T>
T convert_arg(T value) {  // double, bool, int64_t, char*: passed as they are
  return value;
}

inline void release_arg(aclTensor* t) { release(t); }
template <typename T>
void release_arg(T) {}

template <typename Tuple, size_t... I>
void release_all(Tuple& t, std::index_sequence<I...>) {
  (release_arg(std::get<I>(t)), ...);
}
template <typename Tuple, size_t... I>
int call_workspace_fn(void* fn, Tuple& t, std::index_sequence<I...>) {
  using Fn = int (*)(std::decay_t<std::tuple_element_t<I, Tuple>>...);
  return reinterpret_cast<Fn>(fn)(std::get<I>(t)...);
}

}  // namespace portable

template <typename Report, typename... Ts>
int queue_aclnn(const char* name, void* workspace_fn, void* run_fn, bool& queued, Report report, Ts&... args) {
  queued = false;
  portable::apply_deterministic();
  aclrtStream acl_stream = portable::current_stream();
  portable::mem_ctx_init();
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  auto params = std::make_tuple(portable::convert_arg(args)..., &workspace_size, &executor);
  using Params = decltype(params);
  constexpr auto all = std::make_index_sequence<std::tuple_size_v<Params>>{};
  const int status = portable::call_workspace_fn(workspace_fn, params, all);
  if (status != 0 || executor == nullptr) {
    portable::release_all(params, all);
    portable::mem_ctx_uninit();
    return status;
  }
  at::Tensor workspace = workspace_size != 0 ? portable::workspace(workspace_size) : at::Tensor();
  void* workspace_addr = workspace_size != 0 ? workspace.data_ptr() : nullptr;
  auto acl_call = [params, workspace, workspace_addr, workspace_size, acl_stream, executor, run_fn,
                   report]() mutable -> int {
    using Run = int (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);
    const int ret = reinterpret_cast<Run>(run_fn)(workspace_addr, workspace_size, executor, acl_stream);
    portable::release_all(params, std::make_index_sequence<std::tuple_size_v<Params>>{});
    portable::mem_release();
    return report(ret);
  };
  portable::enqueue(name, acl_call);
  portable::mem_ctx_uninit();
  queued = true;
  return 0;
}

#endif  // NPU_EXT_TORCH_NPU_VERSION

}  // namespace compat
}  // namespace npu
}  // namespace npu_ext
