// TEST-ONLY fake ACL runtime (libascendcl.so) on host memory, for running the real torch_npu 2.13.0 without an NPU
// or CANN. Compiled against the acl headers torch_npu's wheel ships (include/third_party/acl/inc), so every
// definition here has the real prototype. Every other CANN function torch_npu links or looks up is a generated
// weak stub returning 0 (build.py: symbols.txt), which a definition here overrides.
//
// What it models (../shared/research/torch-npu-on-fake-cann.md):
//   * one device (aclrtGetDeviceCount = 1); aclrtGetDevice answers 107002 (ACL_ERROR_RT_CONTEXT_NULL) until a
//     device is set, as the real runtime does: torch_npu's init sequence branches on it;
//   * the SoC name from $NPU_FAKE_SOC (default Ascend910B3, an Atlas A2), read by torch_npu once per process;
//   * jit compile "disable" (aclGetCompileopt), so torch_npu takes its aclnn routes, as on an Atlas A2;
//   * device memory = aligned host memory; every copy and memset is synchronous (streams and events too: an
//     event is complete as soon as it is recorded);
//   * graph capture (aclmdlRICapture*): only its status, so code that must not run while a stream is captured
//     can be tested; the work is still done at once and a replay (aclmdlRIExecuteAsync) does nothing;
//   * counters for the tests (fake_cann_count, fake_cann_reset): host<->device copies, stream and device
//     synchronisations, and the device bytes in use and at their peak.
#include <acl/acl.h>
#include <acl/acl_op_compiler.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

constexpr aclError kOk = ACL_SUCCESS;
constexpr aclError kContextNull = 107002;  // ACL_ERROR_RT_CONTEXT_NULL: no device set on this thread
constexpr size_t kAlign = 512;
constexpr size_t kTotalMemory = size_t(64) << 30;  // what aclrtGetMemInfo reports as the device's memory

std::mutex g_mu;
std::map<std::string, int64_t> g_counts;
std::map<void*, size_t> g_allocations;
size_t g_in_use = 0, g_peak = 0;
thread_local int32_t t_device = -1;
std::map<aclrtStream, aclmdlRI> g_capturing;  // the model a stream is being captured into, under g_mu

void count(const char* name, int64_t n = 1) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts[name] += n;
}

// A distinct non-null handle for streams, events and contexts (never dereferenced by torch_npu).
void* new_handle() {
  static std::atomic<uintptr_t> next{0x1000};
  return reinterpret_cast<void*>(next.fetch_add(0x10));
}

const char* copy_kind(aclrtMemcpyKind kind) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_DEVICE: return "memcpy_h2d";
    case ACL_MEMCPY_DEVICE_TO_HOST: return "memcpy_d2h";
    case ACL_MEMCPY_DEVICE_TO_DEVICE: return "memcpy_d2d";
    default: return "memcpy_other";
  }
}

aclError do_copy(void* dst, size_t dest_max, const void* src, size_t count_bytes, aclrtMemcpyKind kind) {
  if (count_bytes > dest_max) return ACL_ERROR_INVALID_PARAM;
  if (count_bytes > 0 && (dst == nullptr || src == nullptr)) return ACL_ERROR_INVALID_PARAM;
  count(copy_kind(kind));
  if (count_bytes > 0) std::memmove(dst, src, count_bytes);
  return kOk;
}

}  // namespace

extern "C" {

// --- test hooks (not ACL API) ---------------------------------------------------------------------------------
int64_t fake_cann_count(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (std::strcmp(name, "bytes_in_use") == 0) return static_cast<int64_t>(g_in_use);
  if (std::strcmp(name, "bytes_peak") == 0) return static_cast<int64_t>(g_peak);
  auto it = g_counts.find(name);
  return it == g_counts.end() ? 0 : it->second;
}

void fake_cann_reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts.clear();
  g_peak = g_in_use;
}

// --- init, devices, SoC ---------------------------------------------------------------------------------------
aclError aclInit(const char*) { return kOk; }
aclError aclFinalize() { return kOk; }

aclError aclrtGetDeviceCount(uint32_t* n) {
  *n = 1;
  return kOk;
}

aclError aclrtSetDevice(int32_t device) {
  if (device != 0) return ACL_ERROR_INVALID_PARAM;
  t_device = device;
  return kOk;
}

aclError aclrtGetDevice(int32_t* device) {
  if (t_device < 0) return kContextNull;
  *device = t_device;
  return kOk;
}

aclError aclrtResetDevice(int32_t) { return kOk; }

const char* aclrtGetSocName() {
  static const std::string soc = [] {
    const char* env = std::getenv("NPU_FAKE_SOC");
    return std::string(env != nullptr && *env != '\0' ? env : "Ascend910B3");
  }();
  return soc.c_str();
}

size_t aclGetCompileoptSize(aclCompileOpt) { return 16; }

aclError aclGetCompileopt(aclCompileOpt, char* value, size_t length) {
  std::strncpy(value, "disable", length);  // jit compile off: torch_npu takes its aclnn routes
  if (length > 0) value[length - 1] = '\0';
  return kOk;
}

aclError aclsysGetVersionStr(char*, char* version) {
  std::strcpy(version, "8.5.0");
  return kOk;
}

// The last rejection reason an operator recorded (CANN's OP_LOGE), kept by the fake libopapi.so.
const char* aclGetRecentErrMsg() {
  using LastError = const char* (*)();
  void* opapi = dlopen("libopapi.so", RTLD_NOW | RTLD_NOLOAD);  // loaded by torch_npu (RTLD_LOCAL)
  const auto last_error = opapi != nullptr ? reinterpret_cast<LastError>(dlsym(opapi, "fake_opapi_last_error")) : nullptr;
  const char* msg = last_error != nullptr ? last_error() : "";
  if (opapi != nullptr) dlclose(opapi);
  return msg;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  static void* ctx = new_handle();
  *context = ctx;
  return kOk;
}

// --- memory ---------------------------------------------------------------------------------------------------
aclError aclrtMalloc(void** ptr, size_t size, aclrtMemMallocPolicy) {
  const size_t bytes = (size + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes == 0 ? kAlign : bytes);
  if (p == nullptr) return ACL_ERROR_BAD_ALLOC;
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocations[p] = bytes;
  g_in_use += bytes;
  if (g_in_use > g_peak) g_peak = g_in_use;
  ++g_counts["malloc"];
  *ptr = p;
  return kOk;
}

aclError aclrtMallocAlign32(void** ptr, size_t size, aclrtMemMallocPolicy policy) {
  return aclrtMalloc(ptr, size, policy);
}

aclError aclrtFree(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_allocations.find(ptr);
    if (it == g_allocations.end()) return ACL_ERROR_INVALID_PARAM;
    g_in_use -= it->second;
    g_allocations.erase(it);
  }
  std::free(ptr);
  return kOk;
}

aclError aclrtMallocHost(void** ptr, size_t size) {
  *ptr = std::aligned_alloc(kAlign, (size + kAlign - 1) / kAlign * kAlign + kAlign);
  return *ptr == nullptr ? ACL_ERROR_BAD_ALLOC : kOk;
}

aclError aclrtFreeHost(void* ptr) {
  std::free(ptr);
  return kOk;
}

aclError aclrtGetMemInfo(aclrtMemAttr, size_t* free_bytes, size_t* total) {
  std::lock_guard<std::mutex> lock(g_mu);
  *total = kTotalMemory;
  *free_bytes = kTotalMemory - g_in_use;
  return kOk;
}

aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t n, aclrtMemcpyKind kind) {
  return do_copy(dst, dest_max, src, n, kind);
}

aclError aclrtMemcpyAsync(void* dst, size_t dest_max, const void* src, size_t n, aclrtMemcpyKind kind, aclrtStream) {
  return do_copy(dst, dest_max, src, n, kind);
}

aclError aclrtMemset(void* ptr, size_t max_count, int32_t value, size_t n) {
  if (n > max_count) return ACL_ERROR_INVALID_PARAM;
  count("memset");
  std::memset(ptr, value, n);
  return kOk;
}

aclError aclrtMemsetAsync(void* ptr, size_t max_count, int32_t value, size_t n, aclrtStream) {
  return aclrtMemset(ptr, max_count, value, n);
}

// --- streams and events: synchronous ---------------------------------------------------------------------------
aclError aclrtCreateStream(aclrtStream* stream) {
  *stream = new_handle();
  return kOk;
}

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t, uint32_t) {
  *stream = new_handle();
  return kOk;
}

aclError aclrtSynchronizeStream(aclrtStream) {
  count("sync_stream");
  return kOk;
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream, int32_t) {
  count("sync_stream");
  return kOk;
}

aclError aclrtSynchronizeDevice() {
  count("sync_device");
  return kOk;
}

aclError aclrtSynchronizeDeviceWithTimeout(int32_t) {
  count("sync_device");
  return kOk;
}

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t) {
  *event = new_handle();
  return kOk;
}

aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t) {
  *event = new_handle();
  return kOk;
}

aclError aclrtQueryEventStatus(aclrtEvent, aclrtEventRecordedStatus* status) {
  *status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
  return kOk;
}

aclError aclrtEventElapsedTime(float* ms, aclrtEvent, aclrtEvent) {
  *ms = 0.0f;
  return kOk;
}

// --- acl_op (TBE/GE single-op) routes: not modelled ------------------------------------------------------------
// torch_npu takes them below Atlas A2 and where an aclnn operator is missing (DO_COMPATIBILITY); the fake cannot run
// a TBE kernel, so the call fails loudly (ACL_ERROR_OP_NOT_FOUND) instead of returning with its outputs unwritten.
aclError aclopCompileAndExecute(const char* op_type, int, const aclTensorDesc* const[], const aclDataBuffer* const[],
                                int, const aclTensorDesc* const[], aclDataBuffer* const[], const aclopAttr*,
                                aclopEngineType, aclopCompileType, const char*, aclrtStream) {
  count((std::string("acl_op ") + op_type).c_str());
  return ACL_ERROR_OP_NOT_FOUND;
}

aclError aclopCompileAndExecuteV2(const char* op_type, int, aclTensorDesc*[], aclDataBuffer*[], int, aclTensorDesc*[],
                                  aclDataBuffer*[], aclopAttr*, aclopEngineType, aclopCompileType, const char*,
                                  aclrtStream) {
  count((std::string("acl_op ") + op_type).c_str());
  return ACL_ERROR_OP_NOT_FOUND;
}

// --- graph capture: the status only ------------------------------------------------------------------------------
aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode) {
  count("capture_begin");
  std::lock_guard<std::mutex> lock(g_mu);
  g_capturing[stream] = new_handle();
  return kOk;
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status, aclmdlRI* model) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_capturing.find(stream);
  const bool active = it != g_capturing.end();
  *status = active ? ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE : ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  if (model != nullptr) *model = active ? it->second : nullptr;
  return kOk;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* model) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_capturing.find(stream);
  if (it == g_capturing.end()) return ACL_ERROR_INVALID_PARAM;
  *model = it->second;
  g_capturing.erase(it);
  return kOk;
}

}  // extern "C"
