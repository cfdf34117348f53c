// TEST-ONLY definitions of the torch_npu / libascendcl functions declared by the stand-in headers in
// tests/npu_stub/include (what libtorch_npu.so and libascendcl.so define for the real ones). Compiled into the
// stand-in extension next to csrc/ops/*/npu.cpp. See npu_cpp_extension.h there for the contracts.
//
// Also registers test hooks (not torch_npu API) as torch.ops.npu_standin.*:
//   synchronize()                              a synchronisation point: reports a failed queued task
//   device_syncs()                             how many times c10_npu::npuSynchronizeDevice was called (the probes)
//   exec_npu_cmd_ext_logit_grad(x, dy, eps, out) aclnnLogitGrad through torch_npu's own EXEC_NPU_CMD_EXT, to show
//                                              what a rejected call does there (deferred 161001)
//   set_capturing(bool)                        what currentStreamCaptureStatusMayInitCtx() reports (an NPU graph
//                                              capture: aclgraph, torch.compile mode="reduce-overhead")
#include <ATen/ATen.h>
#include <dlfcn.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "op_plugin/include/npu_cpp_extension.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"
#include "torch_npu/csrc/core/npu/NPUGraphsUtils.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace {

constexpr int32_t kFormatNCHW = 0, kFormatND = 2, kFormatNCDHW = 30, kFormatNCL = 47;

using CreateTensorFn = aclTensor* (*)(const int64_t*, uint64_t, int32_t, const int64_t*, int64_t, int32_t,
                                      const int64_t*, uint64_t, void*);
using DestroyTensorFn = int (*)(const aclTensor*);
using RunFn = int (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

void* runtime() {
  static void* handle = [] {
    const char* path = std::getenv("NPU_EXT_ACLNN_STANDIN_LIB");
    TORCH_CHECK(path != nullptr, "npu stand-in: NPU_EXT_ACLNN_STANDIN_LIB is not set");
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    TORCH_CHECK(h != nullptr, "npu stand-in: cannot load ", path, ": ", dlerror());
    return h;
  }();
  return handle;
}

void* runtime_symbol(const char* name) { return dlsym(runtime(), name); }

bool listed_missing(const char* name) {
  const char* env = std::getenv("NPU_EXT_STANDIN_MISSING");
  if (env == nullptr) return false;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == name || item + "GetWorkspaceSize" == name) return true;  // a missing operator: both phases
  }
  return false;
}

int32_t acl_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kInt: return 3;
    case at::kLong: return 9;
    case at::kDouble: return 11;
    case at::kBool: return 12;
    case at::kBFloat16: return 27;
    default: TORCH_CHECK(false, "npu stand-in: no aclDataType for ", t);
  }
}

// Workspaces handed out by GetWorkSpaceAddr, kept until the task that uses them has run.
thread_local std::vector<std::unique_ptr<uint8_t[]>> t_workspaces;

// Device synchronisations (npuSynchronizeDevice calls), for the test hook device_syncs().
std::atomic<int> g_device_syncs{0};

// The task queue's deferred error (first failure since the last report).
std::mutex g_queue_mu;
std::string g_failed_task;
int g_failed_code = 0;

void report_failed_task() {
  std::string task;
  int code = 0;
  {
    std::lock_guard<std::mutex> lock(g_queue_mu);
    std::swap(task, g_failed_task);
    std::swap(code, g_failed_code);
  }
  TORCH_CHECK(code == 0, "npu stand-in task queue: an earlier asynchronous task failed: call ", task,
              " failed, error code is ", code,
              " (reported at this later operation; since the operator is called asynchronously, the stacktrace "
              "may be inaccurate)");
}

}  // namespace

// --- libascendcl --------------------------------------------------------------------------------------------
extern "C" const char* aclrtGetSocName() {
  static std::string name;
  const char* env = std::getenv("NPU_FAKE_SOC");
  name = env != nullptr ? env : "Ascend910B3";
  return name.c_str();
}

extern "C" const char* aclGetRecentErrMsg() {
  using Fn = const char* (*)();
  static const auto fn = reinterpret_cast<Fn>(runtime_symbol("fake_opapi_last_error"));
  return fn != nullptr ? fn() : nullptr;
}

// --- op_api_common_base.h -----------------------------------------------------------------------------------
void* GetOpApiFuncAddr(const char* apiName) {
  if (listed_missing(apiName)) return nullptr;
  return runtime_symbol(apiName);
}

aclTensor* ConvertType(const at::Tensor& t) {
  static const auto create = reinterpret_cast<CreateTensorFn>(GetOpApiFuncAddr("aclCreateTensor"));
  if (create == nullptr || !t.defined()) return nullptr;
  int32_t format = kFormatND;  // a base-format tensor's format, by rank, as torch_npu's ConvertType
  switch (t.dim()) {
    case 3: format = kFormatNCL; break;
    case 4: format = kFormatNCHW; break;
    case 5: format = kFormatNCDHW; break;
    default: break;
  }
  const int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.itemsize());
  return create(t.sizes().data(), t.sizes().size(), acl_dtype(t.scalar_type()), t.strides().data(),
                t.storage_offset(), format, &storage_elems, 1, const_cast<void*>(t.storage().data()));
}

aclTensor* ConvertType(const c10::optional<at::Tensor>& t) { return t.has_value() ? ConvertType(*t) : nullptr; }

void Release(aclTensor* p) {
  static const auto destroy = reinterpret_cast<DestroyTensorFn>(GetOpApiFuncAddr("aclDestroyTensor"));
  if (destroy != nullptr) destroy(p);  // like torch_npu: also called with nullptr
}

namespace c10_npu {
uint32_t GetDeterministicLevel() { return 0; }
}  // namespace c10_npu

namespace at_npu {
namespace native {
void ApplyDeterministicLevel(int64_t, bool, bool) {}
int64_t get_npu_format(const at::Tensor&) { return kFormatND; }  // host tensors: ND
at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format) {
  TORCH_CHECK(acl_format == kFormatND, "npu stand-in: host tensors have no private formats");
  return self;
}
}  // namespace native
}  // namespace at_npu

bool CheckAndInitFunc(const char*) { return false; }

void GetApiFunc(const char* api_name, const char* workspace_api_name, void*& opApiFuncAddr,
                void*& getWorkspaceSizeFuncAddr) {
  opApiFuncAddr = GetOpApiFuncAddr(api_name);
  getWorkspaceSizeFuncAddr = GetOpApiFuncAddr(workspace_api_name);
  TORCH_CHECK(opApiFuncAddr != nullptr && getWorkspaceSizeFuncAddr != nullptr, api_name, " or ", workspace_api_name,
              " not in libopapi.so, or libopapi.so not found.");
}

void InitExecCommonCtx() {}
void UnInitExecCommonCtx() {}
void ReleaseExecCommonCtx() {}
aclrtStream GetAclStream() { return nullptr; }
void InitExecSubTheadCtx(aclrtStream) {}

void* GetWorkSpaceAddr(uint64_t workspace_size) {
  if (workspace_size == 0) return nullptr;
  t_workspaces.emplace_back(new uint8_t[workspace_size]);
  return t_workspaces.back().get();
}

int ExecuteApiFunc(const void* opApiFuncAddr, aclrtStream acl_stream, void* workspace_addr, uint64_t workspace_size,
                   aclOpExecutor* executor) {
  return reinterpret_cast<RunFn>(const_cast<void*>(opApiFuncAddr))(workspace_addr, workspace_size, executor,
                                                                     acl_stream);
}

int ExecuteApiFuncV2(const void* opApiFuncAddr, aclrtStream acl_stream, uint64_t workspace_size,
                     aclOpExecutor* executor) {
  return ExecuteApiFunc(opApiFuncAddr, acl_stream, GetWorkSpaceAddr(workspace_size), workspace_size, executor);
}

uint32_t OpApiGetTaskQueueEnable() {
  const char* env = std::getenv("TASK_QUEUE_ENABLE");
  return env == nullptr ? 1u : static_cast<uint32_t>(std::atoi(env));  // torch_npu's default is 1
}

void RunAclCall(const std::string& op_name, const PROC_FUNC& func) {
  if (OpApiGetTaskQueueEnable() == 0) {  // no task queue: runs and reports now
    const int ret = func();
    t_workspaces.clear();
    TORCH_CHECK(ret == 0, "call ", op_name, " failed, error code is ", ret);
    return;
  }
  report_failed_task();  // an earlier task's failure surfaces at this (unrelated) later operation
  int ret = 0;
  std::string what;
  try {
    ret = func();  // the device runs tasks in stream order; only the report is deferred
  } catch (const std::exception& e) {  // torch_npu's ExecFunc: logged, and the task fails (ACL_ERROR_INVALID_PARAM)
    ret = 100000;
    what = e.what();
  }
  t_workspaces.clear();
  if (ret != 0) {
    std::lock_guard<std::mutex> lock(g_queue_mu);
    if (g_failed_code == 0) {
      g_failed_task = what.empty() ? op_name : op_name + " (" + what.substr(0, what.find('\n')) + ")";
      g_failed_code = ret;
    }
  }
}

CacheParams GetCacheParams() { return {}; }

// --- NPUGraphsUtils.h --------------------------------------------------------------------------------------
namespace {
bool g_capturing = false;
}  // namespace

namespace c10_npu {
CaptureStatus currentStreamCaptureStatusMayInitCtx() {
  return g_capturing ? CaptureStatus::Active : CaptureStatus::None;
}
}  // namespace c10_npu

// --- NPUStream.h -------------------------------------------------------------------------------------------
namespace c10_npu {
c10::DeviceIndex current_device() { return 0; }

bool npuSynchronizeDevice(bool check_error) {
  ++g_device_syncs;
  if (check_error) report_failed_task();
  return true;
}
}  // namespace c10_npu

// --- test hooks ---------------------------------------------------------------------------------------------
namespace {

void set_capturing(bool capturing) { g_capturing = capturing; }

void synchronize() { report_failed_task(); }

int64_t device_syncs() { return g_device_syncs.load(); }

void exec_npu_cmd_ext_logit_grad(const at::Tensor& x, const at::Tensor& dy, double eps, const at::Tensor& out) {
  EXEC_NPU_CMD_EXT(aclnnLogitGrad, x, dy, eps, out);
}

}  // namespace

TORCH_LIBRARY(npu_standin, m) {
  m.def("synchronize() -> ()", &synchronize);
  m.def("device_syncs() -> int", &device_syncs);
  m.def("set_capturing(bool capturing) -> ()", &set_capturing);
  m.def("exec_npu_cmd_ext_logit_grad(Tensor x, Tensor dy, float eps, Tensor(a!) out) -> ()",
        &exec_npu_cmd_ext_logit_grad);
}
