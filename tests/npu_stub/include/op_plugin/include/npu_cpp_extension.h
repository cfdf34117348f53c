// TEST-ONLY stand-in for torch_npu 2.13's op_plugin/include/npu_cpp_extension.h, which includes
// op_plugin/utils/op_api_common_base.h. It declares the part of that header the NPU sources use, with the same names,
// signatures and contracts; tests/npu_stub/torch_npu_standin.cpp defines the non-template functions, as
// libtorch_npu.so does for the real ones (all TORCH_NPU_API there):
//   * GetOpApiFuncAddr(name): the aclnn entry point by name (here from the stand-in runtime
//     $NPU_EXT_ACLNN_STANDIN_LIB instead of libcust_opapi.so / libopapi.so / libaclnn_*.so), nullptr when absent
//     (names in $NPU_EXT_STANDIN_MISSING, comma-separated, are absent: an older CANN);
//   * ConvertType / ConvertTypes: at::Tensor -> aclTensor* via aclCreateTensor(sizes, dtype code, strides, storage
//     offset, format, storage dims {storage nbytes / itemsize}, storage base pointer) with the format torch_npu's
//     ConvertType passes for a base-format tensor: NCL for 3-D, NCHW for 4-D, NCDHW for 5-D, ND otherwise; an
//     undefined tensor or empty optional -> nullptr; anything else passed through; arguments bind as lvalues;
//   * ReleaseConvertTypes, ConvertToOpApiFunc, call: as in the real header;
//   * InitExecCommonCtx, UnInitExecCommonCtx, ReleaseExecCommonCtx, GetAclStream, InitExecSubTheadCtx,
//     GetWorkSpaceAddr, ExecuteApiFunc, ExecuteApiFuncV2, OpApiGetTaskQueueEnable ($TASK_QUEUE_ENABLE, default 1),
//     c10_npu::GetDeterministicLevel, at_npu::native::ApplyDeterministicLevel, hit_cache_ext (no executor cache
//     here: always a miss);
//   * RunAclCall(name, func): torch_npu's task queue (OpCommand::RunOpApiV2). With TASK_QUEUE_ENABLE=0 func runs
//     now and a non-zero return raises. Otherwise it is queued: tasks run in stream order (here: at once, so the
//     data is there for later operations) but a failure is only REPORTED later, at the next queued operation or
//     synchronisation (torch.ops.npu_standin.synchronize()), as a RuntimeError naming the failed aclnn call; an
//     exception thrown by a queued func is caught, as torch_npu's ExecFunc catches it, and reported the same way
//     with its message;
//   * CopyTypesV2, ConvertTypesV2, CacheParams, GetCacheParams, hit_cache_v2_ext (always a miss): the V2 path;
//   * EXEC_NPU_CMD_EXT: V1 (TASK_QUEUE_ENABLE != 2: GetWorkspaceSize on the calling thread, its status IGNORED,
//     phase 2 queued) or V2 (== 2: both phases queued), exactly the real macro's sequence.
// It runs on the host: the tests call the PrivateUse1 kernels with CPU tensors.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "acl/acl_rt.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"  // (the real header includes it, and NPUFunctions.h)

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef void* aclrtStream;

void* GetOpApiFuncAddr(const char* apiName);

aclTensor* ConvertType(const at::Tensor& at_tensor);
aclTensor* ConvertType(const c10::optional<at::Tensor>& opt_tensor);

template <typename T>
T ConvertType(T value) {
  return value;
}

void Release(aclTensor* p);

template <typename T>
void Release(T value) {
  (void)value;
}

template <typename Tuple, size_t... I>
void CallRelease(Tuple t, std::index_sequence<I...>) {
  (Release(std::get<I>(t)), ...);
}

template <typename Tuple>
void ReleaseConvertTypes(Tuple& t) {
  CallRelease(t, std::make_index_sequence<std::tuple_size<typename std::decay<Tuple>::type>::value>{});
}

template <typename... Ts>
constexpr auto ConvertTypes(Ts&... args) {
  return std::make_tuple(ConvertType(args)...);
}

template <typename Function, typename Tuple, size_t... I>
auto call(Function f, Tuple t, std::index_sequence<I...>) {
  return f(std::get<I>(t)...);
}

template <typename Function, typename Tuple>
auto call(Function f, Tuple t) {
  return call(f, t, std::make_index_sequence<std::tuple_size<Tuple>::value>{});
}

template <typename Tuple, size_t... I>
auto ConvertToOpApiFunc(const Tuple& params, void* opApiAddr, std::index_sequence<I...>) {
  typedef int (*OpApiFunc)(typename std::decay<decltype(std::get<I>(params))>::type...);
  return reinterpret_cast<OpApiFunc>(opApiAddr);
}

template <typename Tuple>
auto ConvertToOpApiFunc(const Tuple& params, void* opApiAddr) {
  return ConvertToOpApiFunc(params, opApiAddr, std::make_index_sequence<std::tuple_size<Tuple>::value>{});
}

namespace c10_npu {
uint32_t GetDeterministicLevel();
}  // namespace c10_npu

namespace at_npu {
namespace native {
void ApplyDeterministicLevel(int64_t level, bool deterministicAlgorithmsStatus, bool isOpapi);
}  // namespace native
}  // namespace at_npu

bool CheckAndInitFunc(const char* aclnn_api);  // the executor cache: unavailable in the stand-in

template <typename... Args>
bool hit_cache_ext(aclrtStream acl_stream, const char* aclnn_api, void* phrase2, const uint32_t level, Args&&... args) {
  (void)acl_stream, (void)phrase2, (void)level;
  return CheckAndInitFunc(aclnn_api);  // false: a miss, phase 1 runs
}

// TASK_QUEUE_ENABLE=2 (EXEC_NPU_CMD_V2_EXT): the arguments copied on the calling thread (the real CopyTypeV2 keeps a
// tensor's description in a TensorStruct; here the tensor itself), converted in the queued task (ConvertTypesV2),
// and the executor cache's V2 lookup (hit_cache_v2_ext: always a miss here), with the real signatures.
template <typename T>
T CopyTypeV2(const T& value) {
  return value;
}

template <typename... Ts>
auto CopyTypesV2(Ts&... args) {
  return std::make_tuple(CopyTypeV2(args)...);
}

template <typename... Ts>
auto ConvertTypesV2(const std::tuple<Ts...>& args, uint64_t* workspace_size_addr, aclOpExecutor** executor_addr) {
  return std::apply([&](const auto&... a) { return std::make_tuple(ConvertType(a)..., workspace_size_addr,
                                                                   executor_addr); }, args);
}

struct CacheParams {};  // the real one: the core counts (aic/aiv) the call was made with
CacheParams GetCacheParams();

template <typename... Ts>
bool hit_cache_v2_ext(aclrtStream acl_stream, const char* aclnn_api, void* phrase2, const std::tuple<Ts...>& args,
                      int* api_ret, const CacheParams& cache_params, const uint32_t level) {
  (void)acl_stream, (void)phrase2, (void)args, (void)api_ret, (void)cache_params, (void)level;
  return CheckAndInitFunc(aclnn_api);  // false: a miss
}

using PROC_FUNC = std::function<int()>;

void GetApiFunc(const char* api_name, const char* workspace_api_name, void*& opApiFuncAddr,
                void*& getWorkspaceSizeFuncAddr);
void InitExecCommonCtx();
void UnInitExecCommonCtx();
void ReleaseExecCommonCtx();
aclrtStream GetAclStream();
int ExecuteApiFunc(const void* opApiFuncAddr, aclrtStream acl_stream, void* workspace_addr, uint64_t workspace_size,
                   aclOpExecutor* executor);
int ExecuteApiFuncV2(const void* opApiFuncAddr, aclrtStream acl_stream, uint64_t workspace_size,
                     aclOpExecutor* executor);
void* GetWorkSpaceAddr(uint64_t workspace_size);
void InitExecSubTheadCtx(aclrtStream acl_stream);
void RunAclCall(const std::string& op_name, const PROC_FUNC& func);
uint32_t OpApiGetTaskQueueEnable();

#define EXEC_NPU_CMD_V1_EXT(aclnn_api, ...)                                                                          \
  do {                                                                                                               \
    static void* opApiFuncAddr = nullptr;                                                                            \
    static void* getWorkspaceSizeFuncAddr = nullptr;                                                                 \
    GetApiFunc(#aclnn_api, #aclnn_api "GetWorkspaceSize", opApiFuncAddr, getWorkspaceSizeFuncAddr);                  \
    InitExecCommonCtx();                                                                                             \
    auto acl_stream = GetAclStream();                                                                                \
    uint32_t level = c10_npu::GetDeterministicLevel();                                                               \
    at_npu::native::ApplyDeterministicLevel(static_cast<int64_t>(level),                                             \
                                            at::globalContext().deterministicAlgorithms(), true);                \
    if (hit_cache_ext(acl_stream, #aclnn_api, opApiFuncAddr, level, __VA_ARGS__)) {                                  \
      break;                                                                                                         \
    }                                                                                                                \
    uint64_t workspace_size = 0;                                                                                     \
    uint64_t* workspace_size_addr = &workspace_size;                                                                 \
    aclOpExecutor* executor = nullptr;                                                                               \
    aclOpExecutor** executor_addr = &executor;                                                                       \
    auto converted_params = ConvertTypes(__VA_ARGS__, workspace_size_addr, executor_addr);                           \
    auto getWorkspaceSizeFunc = ConvertToOpApiFunc(converted_params, getWorkspaceSizeFuncAddr);                      \
    auto workspace_status = call(getWorkspaceSizeFunc, converted_params); /* ignored, as in torch_npu */             \
    (void)workspace_status;                                                                                          \
    void* workspace_addr = GetWorkSpaceAddr(workspace_size);                                                         \
    auto acl_call = [converted_params, workspace_addr, workspace_size, acl_stream, executor, opApiFuncAddr]() -> int { \
      InitExecSubTheadCtx(acl_stream);                                                                               \
      auto api_ret = ExecuteApiFunc(opApiFuncAddr, acl_stream, workspace_addr, workspace_size, executor);            \
      ReleaseConvertTypes(converted_params);                                                                         \
      ReleaseExecCommonCtx();                                                                                        \
      return api_ret;                                                                                                \
    };                                                                                                               \
    RunAclCall(#aclnn_api, acl_call);                                                                                \
    UnInitExecCommonCtx();                                                                                           \
  } while (false)

// V2 (TASK_QUEUE_ENABLE=2): the arguments are copied and BOTH phases run in the queued task.
#define EXEC_NPU_CMD_V2_EXT(aclnn_api, ...)                                                                  \
  do {                                                                                                       \
    static void* opApiFuncAddr = nullptr;                                                                    \
    static void* getWorkspaceSizeFuncAddr = nullptr;                                                         \
    GetApiFunc(#aclnn_api, #aclnn_api "GetWorkspaceSize", opApiFuncAddr, getWorkspaceSizeFuncAddr);          \
    auto acl_stream = GetAclStream();                                                                        \
    auto copied_params = std::make_tuple(__VA_ARGS__);                                                       \
    auto acl_call = [copied_params, acl_stream]() mutable -> int {                                           \
      InitExecSubTheadCtx(acl_stream);                                                                       \
      InitExecCommonCtx();                                                                                   \
      uint64_t workspace_size = 0;                                                                           \
      aclOpExecutor* executor = nullptr;                                                                     \
      uint64_t* workspace_size_addr = &workspace_size;                                                       \
      aclOpExecutor** executor_addr = &executor;                                                             \
      auto converted_params = std::apply(                                                                    \
          [&](auto&... a) { return ConvertTypes(a..., workspace_size_addr, executor_addr); }, copied_params); \
      auto getWorkspaceSizeFunc = ConvertToOpApiFunc(converted_params, getWorkspaceSizeFuncAddr);            \
      auto workspace_status = call(getWorkspaceSizeFunc, converted_params); /* ignored */                    \
      (void)workspace_status;                                                                                \
      int api_ret = ExecuteApiFuncV2(opApiFuncAddr, acl_stream, workspace_size, executor);                   \
      ReleaseConvertTypes(converted_params);                                                                 \
      ReleaseExecCommonCtx();                                                                                \
      UnInitExecCommonCtx();                                                                                 \
      return api_ret;                                                                                        \
    };                                                                                                       \
    RunAclCall(#aclnn_api, acl_call);                                                                        \
  } while (false)

#define EXEC_NPU_CMD_EXT(aclnn_api, ...)                      \
  do {                                                        \
    const auto task_queue_enable = OpApiGetTaskQueueEnable(); \
    if (task_queue_enable == 2) {                             \
      EXEC_NPU_CMD_V2_EXT(aclnn_api, __VA_ARGS__);            \
    } else {                                                  \
      EXEC_NPU_CMD_V1_EXT(aclnn_api, __VA_ARGS__);            \
    }                                                         \
  } while (false)
