// TEST-ONLY stand-in for torch_npu's op-plugin header of the same name (op_plugin/include/npu_cpp_extension.h).
//
// It provides EXEC_NPU_CMD_EXT with the contract of torch_npu 2.13's (op_plugin/utils/op_api_common_base.h):
//   * resolves aclnnXxxGetWorkspaceSize and aclnnXxx BY NAME from the operator library (here the host
//     stand-in libaclnn_standin.so named by $NPU_EXT_ACLNN_STANDIN_LIB, instead of CANN's libopapi.so);
//   * converts each argument like torch_npu's ConvertType: at::Tensor -> aclTensor* via aclCreateTensor(sizes,
//     dtype code, strides, storage offset, format, storage dims {storage nbytes / itemsize}, storage base
//     pointer); an undefined tensor or an empty c10::optional<at::Tensor> -> nullptr; any other argument
//     (double, bool, int64_t, char*) is passed through unchanged; arguments bind as lvalues (Ts&...);
//   * calls GetWorkspaceSize(args..., &workspaceSize, &executor) and IGNORES its status, allocates the
//     workspace, calls aclnnXxx(workspace, workspaceSize, executor, stream) and fails (RuntimeError) when that
//     returns non-zero, then destroys the converted tensors.
// It runs synchronously on the host: the tests call the PrivateUse1 kernels with CPU tensors.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/util/Optional.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef void* aclrtStream;

namespace npu_standin {

enum DataType : int32_t { kFloat = 0, kFloat16 = 1, kInt32 = 3, kInt64 = 9, kDouble = 11, kBool = 12, kBf16 = 27 };
constexpr int32_t kFormatND = 2;

using CreateTensorFn = aclTensor* (*)(const int64_t*, uint64_t, int32_t, const int64_t*, int64_t, int32_t,
                                      const int64_t*, uint64_t, void*);
using DestroyTensorFn = int (*)(const aclTensor*);
using RunFn = int (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

inline void* library() {
  static void* handle = [] {
    const char* path = std::getenv("NPU_EXT_ACLNN_STANDIN_LIB");
    TORCH_CHECK(path != nullptr, "npu stand-in: NPU_EXT_ACLNN_STANDIN_LIB is not set");
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    TORCH_CHECK(h != nullptr, "npu stand-in: cannot load ", path, ": ", dlerror());
    return h;
  }();
  return handle;
}

inline void* api(const char* name) { return dlsym(library(), name); }

inline int32_t acl_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return kFloat;
    case at::kHalf: return kFloat16;
    case at::kInt: return kInt32;
    case at::kLong: return kInt64;
    case at::kDouble: return kDouble;
    case at::kBool: return kBool;
    case at::kBFloat16: return kBf16;
    default: TORCH_CHECK(false, "npu stand-in: no aclDataType for ", t);
  }
}

inline aclTensor* ConvertType(const at::Tensor& t) {
  static const auto create = reinterpret_cast<CreateTensorFn>(api("aclCreateTensor"));
  TORCH_CHECK(create != nullptr, "npu stand-in: aclCreateTensor not found");
  if (!t.defined()) return nullptr;
  const int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.itemsize());
  return create(t.sizes().data(), t.sizes().size(), acl_dtype(t.scalar_type()), t.strides().data(),
                t.storage_offset(), kFormatND, &storage_elems, 1, const_cast<void*>(t.storage().data()));
}

inline aclTensor* ConvertType(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? ConvertType(*t) : nullptr;
}

template <typename T>
T ConvertType(T value) {
  return value;
}

template <typename... Ts>
auto ConvertTypes(Ts&... args) {
  return std::make_tuple(ConvertType(args)...);
}

inline void Release(aclTensor* p) {
  static const auto destroy = reinterpret_cast<DestroyTensorFn>(api("aclDestroyTensor"));
  if (destroy != nullptr) destroy(p);  // like torch_npu: also called with nullptr
}

template <typename T>
void Release(T) {}

template <typename Tuple, size_t... I>
void ReleaseAll(Tuple& t, std::index_sequence<I...>) {
  (Release(std::get<I>(t)), ...);
}

template <typename Tuple, size_t... I>
int CallWorkspace(void* fn, Tuple& t, std::index_sequence<I...>) {
  using Fn = int (*)(typename std::decay<decltype(std::get<I>(t))>::type...);
  return reinterpret_cast<Fn>(fn)(std::get<I>(t)...);
}

template <typename... Ts>
void Execute(const char* name, const char* ws_name, void* ws_fn, void* run_fn, Ts&... args) {
  TORCH_CHECK(ws_fn != nullptr && run_fn != nullptr, name, " or ", ws_name, " not found in the operator library");
  uint64_t workspace_size = 0;
  uint64_t* workspace_size_addr = &workspace_size;
  aclOpExecutor* executor = nullptr;
  aclOpExecutor** executor_addr = &executor;
  auto converted = ConvertTypes(args..., workspace_size_addr, executor_addr);
  constexpr size_t n = std::tuple_size<decltype(converted)>::value;
  const int workspace_status = CallWorkspace(ws_fn, converted, std::make_index_sequence<n>{});
  (void)workspace_status;  // ignored, as torch_npu does
  std::vector<uint8_t> workspace(workspace_size);
  const int ret = reinterpret_cast<RunFn>(run_fn)(workspace_size ? workspace.data() : nullptr, workspace_size,
                                                  executor, nullptr);
  ReleaseAll(converted, std::make_index_sequence<n>{});
  TORCH_CHECK(ret == 0, "call ", name, " failed, error code is ", ret);
}

}  // namespace npu_standin

#define EXEC_NPU_CMD_EXT(aclnn_api, ...)                                                               \
  do {                                                                                                 \
    static void* standin_ws_fn = npu_standin::api(#aclnn_api "GetWorkspaceSize");                     \
    static void* standin_run_fn = npu_standin::api(#aclnn_api);                                        \
    npu_standin::Execute(#aclnn_api, #aclnn_api "GetWorkspaceSize", standin_ws_fn, standin_run_fn,     \
                         __VA_ARGS__);                                                                 \
  } while (false)
