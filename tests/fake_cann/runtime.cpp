// TEST-ONLY fake ACL runtime (libascendcl.so) on host memory, for running the real torch_npu 2.13.0 without an NPU
// or CANN. Compiled against the acl headers torch_npu's wheel ships (include/third_party/acl/inc), so every
// definition here has the real prototype. Every other CANN function torch_npu links or looks up is a generated
// weak stub returning 0 (build.py: symbols.txt), which a definition here overrides.
//
// What it models (docs/npu.md, "What was verified here"):
//   * $NPU_FAKE_DEVICE_COUNT devices (1 to 8, default 1: every test sees the one-device host it always saw; a test
//     of several devices sets it in its own process); aclrtGetDevice answers 107002 (ACL_ERROR_RT_CONTEXT_NULL)
//     until a device is set, as the real runtime does: torch_npu's init sequence branches on it. aclrtSetDevice
//     refuses an index outside the count (107001, ACL_ERROR_RT_INVALID_DEVICEID). Per device: its context
//     (aclrtGetCurrentContext / aclrtSetCurrentContext switch the thread's device), its memory accounting (each
//     allocation belongs to the thread's device; aclrtGetMemInfo and the "bytes_in_use device <d>" counter are per
//     device), its streams (a stream belongs to the device current at its creation; "streams device <d>"); every
//     device can access every other's memory (aclrtDeviceCanAccessPeer), and a device-to-device copy between two
//     devices' allocations is counted as "memcpy_peer"; NPU_FAKE_STREAM_HANDLES=per-device (aclrtCreateStream);
//   * the SoC name from $NPU_FAKE_SOC (default Ascend910B3, an Atlas A2), read by torch_npu once per process;
//   * the CANN version from $NPU_FAKE_CANN_VERSION (default 8.5.0), what aclsysGetCANNVersion and aclsysGetVersionStr
//     report for every package; torch_npu caches it per process (GetCANNInfo.cpp, GetCANNVersion). From 9.1.0 on,
//     torch_npu 2.13 / 2.14 cast formats on an Atlas A2 / A3 with aclnnNpuFormatCast (opapi/format_cast.cpp);
//   * jit compile "disable" (aclGetCompileopt), so torch_npu takes its aclnn routes, as on an Atlas A2;
//   * device memory = aligned host memory; every copy and memset is synchronous (streams and events too: an
//     event is complete as soon as it is recorded);
//   * the acl_op route (aclopCompileAndExecute[V2]; acl_op_route.cpp): real descriptor, data-buffer and attribute
//     objects; the few op types torch_npu sends there on the tested routes are computed by libopapi.so
//     (opapi/acl_op.cpp);
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

#include "acl_op_desc.h"
#include "runtime.h"

namespace {

using fake_rt::count;
constexpr aclError kOk = ACL_SUCCESS;
constexpr aclError kContextNull = 107002;  // ACL_ERROR_RT_CONTEXT_NULL: no device set on this thread
constexpr size_t kAlign = 512;
constexpr size_t kTotalMemory = size_t(64) << 30;  // what aclrtGetMemInfo reports as the device's memory

std::mutex g_mu;
std::map<std::string, int64_t> g_counts;
std::map<void*, size_t> g_allocations;
size_t g_in_use = 0, g_peak = 0;  // all devices
constexpr int32_t kMaxDevices = 8;
size_t g_device_in_use[kMaxDevices] = {};
std::map<void*, int32_t> g_allocation_device;  // under g_mu
std::map<aclrtStream, int32_t> g_stream_device;  // under g_mu
thread_local int32_t t_device = -1;

int32_t device_count() {
  static const int32_t n = [] {
    const char* env = std::getenv("NPU_FAKE_DEVICE_COUNT");
    const int v = env != nullptr && *env != '\0' ? std::atoi(env) : 1;
    return v >= 1 && v <= kMaxDevices ? v : 1;
  }();
  return n;
}

// The device whose allocation holds `p` (-1: none; under g_mu).
int32_t device_of(const void* p) {
  auto it = g_allocations.upper_bound(const_cast<void*>(p));
  if (it == g_allocations.begin()) return -1;
  --it;
  const auto* base = static_cast<const char*>(it->first);
  if (static_cast<const char*>(p) >= base + it->second) return -1;
  auto d = g_allocation_device.find(it->first);
  return d == g_allocation_device.end() ? -1 : d->second;
}
std::map<aclrtStream, aclmdlRI> g_capturing;  // the model a stream is being captured into, under g_mu


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
  if (kind == ACL_MEMCPY_DEVICE_TO_DEVICE && count_bytes > 0) {
    bool peer;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      const int32_t from = device_of(src), to = device_of(dst);
      peer = from >= 0 && to >= 0 && from != to;
    }
    if (peer) count("memcpy_peer");
  }
  if (count_bytes > 0) std::memmove(dst, src, count_bytes);
  return kOk;
}

}  // namespace

namespace fake_rt {
void count(const char* name, int64_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts[name] += n;
}
}  // namespace fake_rt

extern "C" {

// --- test hooks (not ACL API) ---------------------------------------------------------------------------------
int64_t fake_cann_count(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (std::strcmp(name, "bytes_in_use") == 0) return static_cast<int64_t>(g_in_use);
  if (std::strcmp(name, "bytes_peak") == 0) return static_cast<int64_t>(g_peak);
  for (int32_t d = 0; d < device_count(); ++d) {
    if (("bytes_in_use device " + std::to_string(d)) == name) return static_cast<int64_t>(g_device_in_use[d]);
  }
  auto it = g_counts.find(name);
  return it == g_counts.end() ? 0 : it->second;
}

void fake_cann_reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts.clear();
  g_peak = g_in_use;
}

// Every counter as "name=count" lines (e.g. each acl_op type launched); the text lives until the next call.
const char* fake_cann_dump() {
  static std::string text;
  std::lock_guard<std::mutex> lock(g_mu);
  text.clear();
  for (const auto& [name, n] : g_counts) text += name + "=" + std::to_string(n) + "\n";
  return text.c_str();
}

// --- context options -----------------------------------------------------------------------------------------
// aclrtCtxSetSysParamOpt: what torch_npu (SetDeterministic, ApplyDeterministicLevel) and the NPU path set; the
// fake's operators read ACL_OPT_DETERMINISTIC (0) at phase 1, as CANN's do, through fake_cann_sys_param.
namespace {
std::mutex g_opt_mu;
std::map<int, int64_t> g_opts;
}  // namespace

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value) {
  {
    std::lock_guard<std::mutex> lock(g_opt_mu);
    g_opts[static_cast<int>(opt)] = value;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_counts["sys param " + std::to_string(static_cast<int>(opt)) + " = " + std::to_string(value)];
  return kOk;
}

// The process-wide form (torch_npu 2.13 and later, where the CANN has it): the same options here.
aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value) { return aclrtCtxSetSysParamOpt(opt, value); }

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t* value) {
  if (value == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lock(g_opt_mu);
  auto it = g_opts.find(static_cast<int>(opt));
  *value = it == g_opts.end() ? 0 : it->second;
  return kOk;
}

int64_t fake_cann_sys_param(int opt) {
  std::lock_guard<std::mutex> lock(g_opt_mu);
  auto it = g_opts.find(opt);
  return it == g_opts.end() ? 0 : it->second;
}

// --- init, devices, SoC ---------------------------------------------------------------------------------------
aclError aclInit(const char*) { return kOk; }
aclError aclFinalize() { return kOk; }

aclError aclrtGetDeviceCount(uint32_t* n) {
  *n = static_cast<uint32_t>(device_count());
  return kOk;
}

aclError aclrtSetDevice(int32_t device) {
  if (device < 0 || device >= device_count()) return 107001;  // ACL_ERROR_RT_INVALID_DEVICEID
  t_device = device;
  return kOk;
}

aclError aclrtDeviceCanAccessPeer(int32_t* can_access, int32_t device, int32_t peer) {
  if (can_access == nullptr || device < 0 || device >= device_count() || peer < 0 || peer >= device_count()) {
    return 107001;
  }
  *can_access = device != peer ? 1 : 0;
  return kOk;
}

aclError aclrtDeviceEnablePeerAccess(int32_t peer, uint32_t) {
  return peer >= 0 && peer < device_count() ? kOk : 107001;
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

// $NPU_FAKE_CANN_VERSION, or 8.5.0: digits and dots, at most 3 parts (major.minor.release), a short string.
const std::string& cann_version() {
  static const std::string version = [] {
    const char* env = std::getenv("NPU_FAKE_CANN_VERSION");
    return std::string(env != nullptr && *env != '\0' && std::strlen(env) < 32 ? env : "8.5.0");
  }();
  return version;
}

aclError aclsysGetVersionStr(char*, char* version) {
  std::strcpy(version, cann_version().c_str());
  return kOk;
}

#ifdef ACL_PKG_VERSION_MAX_SIZE
// The same version, in the struct form the torch_npu releases that look it up by this name read (the first .postN
// of 2.7.1 do, and print a warning with the struct's bytes when it is not filled). Defined where the wheel's acl.h
// declares it; elsewhere the weak stub stays.
aclError aclsysGetCANNVersion(aclCANNPackageName, aclCANNPackageVersion* version) {
  std::memset(version, 0, sizeof(*version));
  const std::string& v = cann_version();
  std::strncpy(version->version, v.c_str(), sizeof(version->version) - 1);
  char* parts[3] = {version->majorVersion, version->minorVersion, version->releaseVersion};
  const size_t sizes[3] = {sizeof(version->majorVersion), sizeof(version->minorVersion),
                           sizeof(version->releaseVersion)};
  size_t start = 0;
  for (int i = 0; i < 3 && start <= v.size(); ++i) {
    const size_t dot = v.find('.', start);
    const std::string part = v.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    std::strncpy(parts[i], part.c_str(), sizes[i] - 1);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return kOk;
}
#endif

// The last rejection reason an operator recorded (CANN's OP_LOGE), kept by the fake libopapi.so.
const char* aclGetRecentErrMsg() {
  using LastError = const char* (*)();
  void* opapi = dlopen("libopapi.so", RTLD_NOW | RTLD_NOLOAD);  // loaded by torch_npu (RTLD_LOCAL)
  const auto last_error = opapi != nullptr ? reinterpret_cast<LastError>(dlsym(opapi, "fake_opapi_last_error")) : nullptr;
  const char* msg = last_error != nullptr ? last_error() : "";
  if (opapi != nullptr) dlclose(opapi);
  return msg;
}

// One context per device; setting one makes its device the thread's.
void* const* device_contexts() {
  static void* const* contexts = [] {
    auto* c = new void*[kMaxDevices];
    for (int32_t d = 0; d < kMaxDevices; ++d) c[d] = new_handle();
    return c;
  }();
  return contexts;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  *context = device_contexts()[t_device < 0 ? 0 : t_device];
  return kOk;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  for (int32_t d = 0; d < device_count(); ++d) {
    if (device_contexts()[d] == context) {
      t_device = d;
      return kOk;
    }
  }
  return ACL_ERROR_INVALID_PARAM;
}

// --- memory ---------------------------------------------------------------------------------------------------
// Failure injection (test hook, not ACL API): while armed, every device allocation of at least `min_bytes` fails
// as the device's memory being exhausted (fake_cann_fail_malloc(0) disarms).
namespace {
std::atomic<size_t> g_fail_malloc{0};
}  // namespace

extern "C" void fake_cann_fail_malloc(size_t min_bytes) { g_fail_malloc = min_bytes; }

aclError aclrtMalloc(void** ptr, size_t size, aclrtMemMallocPolicy) {
  const size_t fail = g_fail_malloc;
  if (fail != 0 && size >= fail) {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_counts["malloc failed"];
    return 207001;  // ACL_ERROR_RT_MEMORY_ALLOCATION: out of device memory
  }
  const size_t bytes = (size + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes == 0 ? kAlign : bytes);
  if (p == nullptr) return ACL_ERROR_BAD_ALLOC;
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocations[p] = bytes;
  const int32_t device = t_device < 0 ? 0 : t_device;
  g_allocation_device[p] = device;
  g_device_in_use[device] += bytes;
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
    g_device_in_use[g_allocation_device[ptr]] -= it->second;
    g_allocation_device.erase(ptr);
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
  *free_bytes = kTotalMemory - g_device_in_use[t_device < 0 ? 0 : t_device];
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
// NPU_FAKE_STREAM_HANDLES=per-device: stream handles numbered per device, so that the k-th stream of every device
// has the same handle (a real runtime's never coincide while both live): a key that tells devices apart only by the
// stream then sees two devices as one.
aclError aclrtCreateStream(aclrtStream* stream) {
  const int32_t device = t_device < 0 ? 0 : t_device;
  static const bool per_device = [] {
    const char* env = std::getenv("NPU_FAKE_STREAM_HANDLES");
    return env != nullptr && std::strcmp(env, "per-device") == 0;
  }();
  static std::atomic<uintptr_t> next[kMaxDevices] = {};
  *stream = per_device ? reinterpret_cast<void*>(0x10000000 + 0x10 * next[device].fetch_add(1)) : new_handle();
  std::lock_guard<std::mutex> lock(g_mu);
  g_stream_device[*stream] = device;
  ++g_counts["streams device " + std::to_string(device)];
  return kOk;
}

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t, uint32_t) { return aclrtCreateStream(stream); }

// Test hook: the device whose allocation holds `p` (-1: none), for the fake operators' device checks.
int32_t fake_cann_device_of(const void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  return device_of(p);
}

// Test hook: the device a stream was created on (-1: not a stream of this runtime).
int32_t fake_cann_stream_device(aclrtStream stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_stream_device.find(stream);
  return it == g_stream_device.end() ? -1 : it->second;
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
