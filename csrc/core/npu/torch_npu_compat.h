// Every difference between the torch_npu releases _C_npu builds against (2.6.0 to 2.14.0), in one place: how an
// aclnn operator is looked up and queued. npu_common.h's launch() and probe_launch() call queue_aclnn() below
// and nothing else of torch_npu's aclnn machinery; no op file tests a torch_npu version.
//
// NPU_EXT_TORCH_NPU_VERSION (major * 100 + minor, e.g. 213) is set by setup.py from the installed torch_npu, and
// NPU_EXT_OP_API_EXTENSION (0 or 1) from its headers: whether its include directory ships op-plugin's extension API.
//
// Two ways to call aclnn, chosen by what the release ships (NPU_EXT_OP_API_EXTENSION):
//
//  * torch_npu 2.7.1.post4 and later export op-plugin's extension API (op_plugin/include/npu_cpp_extension.h, the
//    functions torch_npu's own EXEC_NPU_CMD uses): the aclnn lookup (GetOpApiFuncAddr), the argument conversion,
//    torch_npu's executor cache, its deterministic setting, its workspace and its task queue (RunAclCall); the
//    thread-local memory context is nnopbase's functions, looked up once with GetOpApiFuncAddr (mem_ctx_*, as
//    torch_npu's own EXEC_NPU_CMD_V1 calls them; the exported *ExecCommonCtx look them up at every call).
//    queue_aclnn() runs them in the order of torch_npu's own EXEC_NPU_CMD_V1 (the cache lookup first; see
//    queue_aclnn), with two differences: phase 1's status is checked on the calling thread (npu_common.h), and in the
//    level form torch.use_deterministic_algorithms joins torch_npu's cache hash. With TASK_QUEUE_ENABLE=2 it runs
//    them as EXEC_NPU_CMD_V2_EXT does instead (queue_aclnn_v2): lookup, phase 1 and launch in the queued task. Two steps differ between releases:
//      - 2.13 and later, and 2.7.1.post11 (NPU_EXT_HIT_CACHE_LEVEL, read from the headers): the deterministic
//        LEVEL (c10_npu::GetDeterministicLevel, applied with at_npu::native::ApplyDeterministicLevel after a
//        cache miss, for phase 1), and hit_cache_ext takes that level;
//      - 2.7.1.post4 to 2.12 otherwise: SetExecConfig() applies torch.use_deterministic_algorithms after the cache
//        lookup, and hit_cache_ext has no level parameter (a level passed there would be hashed as the first op
//        argument).
//    Using the exported API keeps the extension's calls in torch_npu's cache, memory context and deterministic
//    state exactly as torch_npu's own operators are.
//
//  * torch_npu 2.6 exports none of it (its op_plugin include folder has ops.h alone; GetOpApiFuncAddr,
//    ConvertTypes, InitExecCommonCtx and RunAclCall are internal to libtorch_npu.so), and the first .postN of 2.7.1
//    (2.7.1, 2.7.1.post2) ship neither npu_cpp_extension.h nor op_api_common_base.h. There the call is made
//    with CANN's C API and the torch_npu API every release exports: the operators are looked up in CANN's
//    libraries with dlopen/dlsym (custom and vendor packages, libopapi.so, then the feature libraries, as op-plugin
//    does), the arguments converted with nnopbase's aclCreateTensor & co. (resolved in the same libraries), the memory
//    context is nnopbase's InitHugeMemThreadLocal / UnInitHugeMemThreadLocal / ReleaseHugeMem when the CANN has
//    them, the workspace is a byte tensor of torch_npu's caching allocator kept alive by the queued task,
//    torch.use_deterministic_algorithms is applied with aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC) (what
//    torch_npu's internal SetDeterministic does), and phase 2 goes through torch_npu's task queue with
//    at_npu::native::OpCommand::RunOpApiV2 (exported by every release from 2.1 to 2.14). No executor cache: the
//    nnopbase cache interface torch_npu uses is internal. MindSpeed's own aclnn layer (ACLNN_CMD in
//    mindspeed/ops/csrc/cann/inc/aclnn_common.h) calls aclnn on these releases the same way.
//
// Why not the second way everywhere: where it is shipped, the exported API is what torch_npu's own operators use,
// so the extension's calls share their executor cache (no phase 1 on a repeated call), their deterministic level
// (2.13: levels beyond on/off) and their memory context. Why not only the first: 2.6 and the first .postN of 2.7.1
// do not have it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#ifndef NPU_EXT_TORCH_NPU_VERSION
#error "NPU_EXT_TORCH_NPU_VERSION (torch_npu major * 100 + minor) must be defined by the build (setup.py)"
#endif

// Whether op-plugin's hit_cache_ext takes the deterministic level (and torch_npu applies it with
// ApplyDeterministicLevel, without SetExecConfig): set by setup.py from the installed headers, because torch_npu
// changed it inside a release (2.7.1.post11 has the 2.13 form); by the version when a build does not say.
#ifndef NPU_EXT_HIT_CACHE_LEVEL
#define NPU_EXT_HIT_CACHE_LEVEL (NPU_EXT_TORCH_NPU_VERSION >= 213)
#endif

// Whether the installed torch_npu ships op-plugin's extension API (op_plugin/include/npu_cpp_extension.h and
// op_plugin/utils/op_api_common_base.h): set by setup.py from the installed headers, because the first .postN of
// torch_npu 2.7.1 (2.7.1, 2.7.1.post2) ship neither and take the 2.6 path; by the version when a build does not say.
#ifndef NPU_EXT_OP_API_EXTENSION
#define NPU_EXT_OP_API_EXTENSION (NPU_EXT_TORCH_NPU_VERSION >= 207)
#endif

#if NPU_EXT_OP_API_EXTENSION
#include "op_plugin/include/npu_cpp_extension.h"

#include <utility>
#else
#include <acl/acl_rt.h>  // aclrtStream

#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#endif

struct aclOpExecutor;  // nnopbase's (op-plugin's headers declare the same)

namespace npu_ext {
namespace npu {
namespace compat {

// An aclnn function (entry point or nnopbase object API) by name, or nullptr.
void* op_api_symbol(const char* name);

// How queue_aclnn() calls aclnn on this torch_npu, for the status report.
const char* aclnn_layer();

// queue_aclnn()'s status when an argument could not be converted for aclnn (torch_npu 2.6 path; the reason in
// conversion_error(), thread-local). Nothing was called, everything converted before was released.
inline constexpr int kConversionFailed = -2;
std::string& conversion_error();

// Runs `undo` when it goes out of scope armed: what a call holds (the memory context, the converted arguments, the
// executor) is released on every exit, an exception between phase 1 and the enqueue included (a workspace the
// caching allocator cannot give, a throw in the argument conversion).
template <typename Undo>
class ScopeGuard {
 public:
  explicit ScopeGuard(Undo undo) : undo_(std::move(undo)) {}
  ~ScopeGuard() {
    if (armed_) undo_();
  }
  void disarm() { armed_ = false; }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Undo undo_;
  bool armed_ = true;
};

// An executor phase 1 made and nothing launched (nnopbase's aclDestroyAclOpExecutor).
void destroy_executor(aclOpExecutor* executor);

// torch_npu's private storage formats (FRACTAL_NZ, NC1HWC0, NDC1HWC0, FRACTAL_Z, ...): a tensor in one keeps its
// logical shape for torch while its memory holds a tiled, padded layout. torch_npu never hands one to an aclnn
// operator: op-plugin's generated dispatch sends a call with such an input to the operator's acl_op kernel, whose
// graph inserts TransData (and raises on SoCs without acl_op). The NPU path has no acl_op kernels, so it casts such
// an input to its base format first, with torch_npu's npu_format_cast (torch_npu/csrc/core/npu/NPUFormat.h, exported
// by every release from 2.6), as the acl_op graph's TransData would; a base-format tensor (ND, NCHW, NHWC, NCDHW:
// FormatHelper::IsOpInputBaseFormat) is returned as it is.
// The format is read from the storage's descriptor (NPUStorageImpl::npu_desc_) after the storage's type is checked,
// where the headers have NPUStorageImpl.h (every torch_npu release; not the aarch64 stand-in, tests/npu_stub, where
// get_npu_format is called): get_npu_format checks the type a second time, a dynamic_cast (about 350 host
// instructions a tensor on torch_npu 2.13).
bool private_format(const at::Tensor& t);
at::Tensor base_format(const at::Tensor& t);

// A new contiguous tensor in the base format ND on the NPU device of `options` (an output): torch_npu's
// OpPreparation::apply_tensor_without_format, what torch_npu's own operators allocate their outputs with, where the
// release is known to export it (2.9 and later: TORCH_NPU_API; 2.6 does not export it, 2.7.1.post10 does, the other
// 2.7.1 .postN and 2.8 were not checked), else at::empty. at::empty reaches the same allocation (NPUNativeFunctions::empty) through the dispatcher and its NPU
// kernel's device guard: about 1.6k host instructions more a call on torch_npu 2.13 (benchmarks/npu_host_cost.py).
at::Tensor empty(c10::IntArrayRef sizes, const at::TensorOptions& options);


#if NPU_EXT_OP_API_EXTENSION

// nnopbase's thread-local memory context, called as torch_npu's own EXEC_NPU_CMD_V1 calls it (op-plugin's
// op_api_common.h, 2.9 to 2.13: InitHugeMemThreadLocal(nullptr, false) before phase 1, ReleaseHugeMem(nullptr, false)
// in the queued task, then UnInitHugeMemThreadLocal(nullptr, false) and UnInitPTACacheThreadLocal()), each function
// looked up once. The exported InitExecCommonCtx / ReleaseExecCommonCtx / UnInitExecCommonCtx call the same
// functions but look each one up by name (GetOpApiFuncAddr: a dlsym) at every call, about 900 host instructions each
// (benchmarks/npu_host_cost.py).
void mem_ctx_init();
void mem_ctx_release();
void mem_ctx_uninit();

// Phase 1 on the calling thread; when it returns an executor, phase 2 is queued on torch_npu's task queue and
// `report(status)` inside the queued task turns phase 2's status into what the task reports to the queue. A hit
// of torch_npu's executor cache queues the cached executor's phase 2 (accepted before) without `report`. Returns
// phase 1's status; `queued` says whether phase 2 was queued.
//
// The order is torch_npu's own EXEC_NPU_CMD_V1's (2.9 to 2.13): the stream, the cache lookup, then on a miss only the
// deterministic state (2.13: ApplyDeterministicLevel; 2.7.1 to 2.12: SetExecConfig) and the memory context. The
// extension macro (EXEC_NPU_CMD_V1_EXT) opens the memory context first, and on 2.13 applies the level before the
// lookup: a hit paid both (about 3.5k host instructions on the fake CANN) for a launch that uses neither
// (benchmarks/npu_host_cost.py, docs/performance.md).
// One addition to torch_npu's hash on 2.13 and later: torch.use_deterministic_algorithms.
// torch_npu 2.13 hashes the deterministic LEVEL (c10_npu::GetDeterministicLevel), which that setting does not
// change, while ApplyDeterministicLevel applies both; an executor made before torch.use_deterministic_algorithms
// (True) would be answered after it, with the kernels phase 1 chose without determinism (tests/npu/test_npu_cache.py
// shows the hit). 2.7.1 to 2.12 hash the setting themselves (CacheParams). The extra value only enters the hash:
// hit_cache_ext converts nothing.
template <typename Report, typename Reject, typename... Ts>
int queue_aclnn_v2(const char* name, void* workspace_fn, void* run_fn, Report report, Reject reject, Ts&... args);

template <typename Report, typename Reject, typename... Ts>
int queue_aclnn(const char* name, void* workspace_fn, void* run_fn, bool& queued, Report report, Reject reject,
                Ts&... args) {
  queued = false;
  if (OpApiGetTaskQueueEnable() == 2) {  // read at every call, as EXEC_NPU_CMD_EXT does
    queued = true;
    return queue_aclnn_v2(name, workspace_fn, run_fn, report, reject, args...);
  }
  aclrtStream acl_stream = GetAclStream();
#if NPU_EXT_HIT_CACHE_LEVEL
  const uint32_t level = c10_npu::GetDeterministicLevel();
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  if (hit_cache_ext(acl_stream, name, run_fn, level, args..., deterministic)) {
    queued = true;  // a hit returns here (ExecuteCachedOp ended the cache's thread state)
    return 0;
  }
  // Applied for phase 1, on a miss: as torch_npu's own operators (2.13: the level only hashed by hit_cache, nothing
  // applied on a hit; 2.9 to 2.12: SetDeterministic after the lookup) and as SetExecConfig below. The extension
  // macro applies it before the lookup, three runtime calls (aclrt(Ctx)SetSysParamOpt) on every hit.
  at_npu::native::ApplyDeterministicLevel(static_cast<int64_t>(level), deterministic, true);
#else
  if (hit_cache_ext(acl_stream, name, run_fn, args...)) {
    queued = true;
    return 0;
  }
  SetExecConfig();  // torch.use_deterministic_algorithms
#endif
  // The memory context only on a miss, after the lookup, as torch_npu's own EXEC_NPU_CMD_V1 opens it (the extension
  // macro opens it first and leaves it open on a hit).
  mem_ctx_init();
  ScopeGuard context([] { mem_ctx_uninit(); });
  uint64_t workspace_size = 0;
  uint64_t* workspace_size_addr = &workspace_size;
  aclOpExecutor* executor = nullptr;
  aclOpExecutor** executor_addr = &executor;
  auto converted_params = ConvertTypes(args..., workspace_size_addr, executor_addr);
  ScopeGuard converted([&converted_params] { ReleaseConvertTypes(converted_params); });
  auto get_workspace_size = ConvertToOpApiFunc(converted_params, workspace_fn);
  const int status = call(get_workspace_size, converted_params);
  if (status != 0 || executor == nullptr) return status;
  ScopeGuard made([executor] { destroy_executor(executor); });
  void* workspace_addr = GetWorkSpaceAddr(workspace_size);
  auto acl_call = [converted_params, workspace_addr, workspace_size, acl_stream, executor, run_fn, report]() -> int {
    InitExecSubTheadCtx(acl_stream);
    const int ret = ExecuteApiFunc(run_fn, acl_stream, workspace_addr, workspace_size, executor);
    ReleaseConvertTypes(converted_params);
    mem_ctx_release();
    return report(ret);
  };
  converted.disarm();  // the queued task owns them now (RunAclCall copies acl_call first)
  made.disarm();
  RunAclCall(name, acl_call);
  queued = true;
  return 0;  // `context` ends the memory context, as the macro after RunAclCall
}

// TASK_QUEUE_ENABLE=2: torch_npu's own EXEC_NPU_CMD_V2_EXT (op_api_common_base.h, every release that ships it), whose
// queued task does the lookup, phase 1 and the launch on the queue's thread. The calling thread only copies the
// arguments (CopyTypesV2: a tensor's description, not its storage) and reads what must be read there: the stream,
// CacheParams (GetCacheParams: the core counts; before 2.13 the deterministic setting) and, on 2.13 and later, the
// deterministic level and torch.use_deterministic_algorithms. In the task: the deterministic state (2.13:
// ApplyDeterministicLevel before the lookup; before: SetExecConfigV2 after it), the lookup (hit_cache_v2_ext:
// CheckAndInitFuncV2, nnopbase's SetPTACacheHashKey and PTAFindExecCache, a hit launched by ExecuteCachedOpV2), then
// on a miss the memory context, the conversion (ConvertTypesV2), phase 1, the launch (ExecuteApiFuncV2: the
// workspace from torch_npu's allocator on the queue's stream) and the release. Two differences from the macro: phase
// 1's status is checked (the macro ignores it and launches a null executor): a rejected call runs `reject(status)`
// in the task, whose return (or exception) torch_npu's queue reports at the next synchronisation, as it does for
// its own operators in this mode; on 2.13 torch.use_deterministic_algorithms joins the hash (as in queue_aclnn), and on
// every release the device index (which V2's hash leaves out).
// Always returns 0: whatever happens next happens in the task.
template <typename Report, typename Reject, typename... Ts>
int queue_aclnn_v2(const char* name, void* workspace_fn, void* run_fn, Report report, Reject reject, Ts&... args) {
  aclrtStream acl_stream = GetAclStream();
  auto copied_params = CopyTypesV2(args...);
  const CacheParams cache_params = GetCacheParams();
  // The device joins the hash: V1's AddCacheConfigParams hashes c10_npu::current_device() and the stream, V2's
  // AddCacheConfigParamsV2 the stream alone (op-plugin, every branch with it), so two devices' calls would share an
  // entry wherever their stream handles coincide (tests/npu/test_npu_cache_key.py makes the fake's coincide).
  const int64_t device = static_cast<int64_t>(c10_npu::current_device());
#if NPU_EXT_HIT_CACHE_LEVEL
  const uint32_t level = c10_npu::GetDeterministicLevel();
  const bool deterministic = at::globalContext().deterministicAlgorithms();
#endif
  auto acl_call = [=]() mutable -> int {
    InitExecSubTheadCtx(acl_stream);
    int api_ret = 0;
#if NPU_EXT_HIT_CACHE_LEVEL
    at_npu::native::ApplyDeterministicLevel(static_cast<int64_t>(level), deterministic, true);
    // these join the hash only (hit_cache_v2_ext hashes the tuple it is given; ConvertTypesV2 never sees them)
    const auto hashed = std::tuple_cat(copied_params, std::make_tuple(deterministic, device));
    if (hit_cache_v2_ext(acl_stream, name, run_fn, hashed, &api_ret, cache_params, level)) return api_ret;
#else
    const auto hashed = std::tuple_cat(copied_params, std::make_tuple(device));
    if (hit_cache_v2_ext(acl_stream, name, run_fn, hashed, &api_ret, cache_params)) return api_ret;
    SetExecConfigV2(cache_params);
#endif
    mem_ctx_init();
    ScopeGuard context([] { mem_ctx_uninit(); });
    uint64_t workspace_size = 0;
    uint64_t* workspace_size_addr = &workspace_size;
    aclOpExecutor* executor = nullptr;
    aclOpExecutor** executor_addr = &executor;
    auto converted_params = ConvertTypesV2(copied_params, workspace_size_addr, executor_addr);
    ScopeGuard converted([&converted_params] { ReleaseConvertTypes(converted_params); });
    auto get_workspace_size = ConvertToOpApiFunc(converted_params, workspace_fn);
    const int status = call(get_workspace_size, converted_params);
    if (status != 0 || executor == nullptr) return reject(status);  // the guards release what phase 1 had
    {
      ScopeGuard made([executor] { destroy_executor(executor); });  // until the launch: the workspace may throw
      api_ret = ExecuteApiFuncV2(run_fn, acl_stream, workspace_size, executor);  // (the launch consumes it)
      made.disarm();
    }
    converted.disarm();
    ReleaseConvertTypes(converted_params);
    mem_ctx_release();
    return report(api_ret);  // `context` ends the memory context (UnInitExecCommonCtx in the macro)
  };
  RunAclCall(name, acl_call);
  return 0;
}

#else  // torch_npu 2.6 (and 2.7.1, 2.7.1.post2): CANN's C API and OpCommand::RunOpApiV2

struct aclTensor;

namespace portable {

// nullptr when the tensor cannot be described (the reason in conversion_error()): a throw in the middle of the
// argument list would leak the arguments converted before it.
aclTensor* convert(const at::Tensor& t);
void release(aclTensor* t);
void apply_deterministic();  // aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC) on every launch
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

template <typename Report, typename Reject, typename... Ts>
int queue_aclnn(const char* name, void* workspace_fn, void* run_fn, bool& queued, Report report, Reject,
                Ts&... args) {
  queued = false;
  portable::apply_deterministic();
  aclrtStream acl_stream = portable::current_stream();
  portable::mem_ctx_init();
  ScopeGuard context([] { portable::mem_ctx_uninit(); });
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  conversion_error().clear();
  auto params = std::make_tuple(portable::convert_arg(args)..., &workspace_size, &executor);
  using Params = decltype(params);
  constexpr auto all = std::make_index_sequence<std::tuple_size_v<Params>>{};
  ScopeGuard converted([&params] { portable::release_all(params, all); });
  if (!conversion_error().empty()) return kConversionFailed;  // the guards release what was converted
  const int status = portable::call_workspace_fn(workspace_fn, params, all);
  if (status != 0 || executor == nullptr) return status;
  ScopeGuard made([executor] { destroy_executor(executor); });
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
  converted.disarm();  // the queued task owns them now
  made.disarm();
  portable::enqueue(name, acl_call);
  queued = true;
  return 0;  // `context` ends the memory context
}

#endif  // NPU_EXT_OP_API_EXTENSION

}  // namespace compat
}  // namespace npu
}  // namespace npu_ext
