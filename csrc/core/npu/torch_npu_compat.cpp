// The torch_npu-release-dependent functions of npu/torch_npu_compat.h (see there).
#include "core/npu/torch_npu_compat.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "torch_npu/csrc/core/npu/NPUFormat.h"

// The real torch_npu's headers (not the aarch64 stand-in's, tests/npu_stub/include, which has neither).
#if __has_include("torch_npu/csrc/core/NPUStorageImpl.h")
#include "torch_npu/csrc/core/NPUStorageImpl.h"
#define NPU_EXT_NPU_STORAGE_DESC 1
#else
#define NPU_EXT_NPU_STORAGE_DESC 0
#endif
#if NPU_EXT_TORCH_NPU_VERSION >= 209 && __has_include("torch_npu/csrc/framework/utils/OpPreparation.h")
#include "torch_npu/csrc/framework/utils/OpPreparation.h"
#define NPU_EXT_APPLY_TENSOR 1
#else
#define NPU_EXT_APPLY_TENSOR 0
#endif

#if !NPU_EXT_OP_API_EXTENSION
#include <acl/acl.h>
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#endif

namespace npu_ext {
namespace npu {
namespace compat {

namespace {

// aclFormat codes (acl_base.h) and their base formats (torch_npu FormatHelper's table).
constexpr int64_t kNCHW = 0, kNHWC = 1, kND = 2, kNC1HWC0 = 3, kFractalZ = 4, kNDHWC = 27,
                  kNCDHW = 30, kNDC1HWC0 = 32, kFractalZ3D = 33;

int64_t base_of(int64_t format) {
  switch (format) {
    case kNC1HWC0: case kFractalZ: return kNCHW;
    case kNDHWC: case kNDC1HWC0: case kFractalZ3D: return kNCDHW;
    default: return kND;  // FRACTAL_NZ and its C0 variants
  }
}

// Whether t's storage is torch_npu's NPUStorageImpl, the only storage that carries an NPU format. A foreign storage
// (at::from_blob, DLPack: a plain c10::StorageImpl over device memory) has no descriptor: torch_npu up to 2.12 reads
// one past its end, and 2.13 raises (NPUBridge.cpp, GetNpuStorageImplDesc's typeid check). Compared by the dynamic
// type's mangled name, which needs no symbol of libtorch_npu.
// The name's address is kept after the first match: the same type_info gives the same address.
bool npu_storage(const c10::StorageImpl* impl) {
  static std::atomic<const char*> known{nullptr};
  if (impl == nullptr) return false;
  const char* name = typeid(*impl).name();
  if (name == known.load(std::memory_order_relaxed)) return true;
  if (std::strcmp(name, "N9torch_npu14NPUStorageImplE") != 0) return false;
  known.store(name, std::memory_order_relaxed);
  return true;
}

// The tensor's NPU format when it is a private one (FormatHelper::IsOpInputBaseFormat false), else -1. A tensor over
// a foreign storage is in its base format: its format is never read.
int64_t private_format_of(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_privateuseone() || !t.has_storage()) return -1;
  const c10::StorageImpl* impl = t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (!npu_storage(impl)) return -1;
#if NPU_EXT_NPU_STORAGE_DESC
  // what get_npu_format returns (NPUNativeFunctions::get_npu_format), without its second type check
  const int64_t format = static_cast<const torch_npu::NPUStorageImpl*>(impl)->npu_desc_.npu_format_;
#else
  const int64_t format = at_npu::native::get_npu_format(t);
#endif
  return format != kND && format != kNCHW && format != kNHWC && format != kNCDHW ? format : -1;
}

}  // namespace

bool private_format(const at::Tensor& t) { return private_format_of(t) >= 0; }

at::Tensor base_format(const at::Tensor& t) {
  const int64_t format = private_format_of(t);
  return format < 0 ? t : at_npu::native::npu_format_cast(t, base_of(format));
}

at::Tensor empty(c10::IntArrayRef sizes, const at::TensorOptions& options) {
#if NPU_EXT_APPLY_TENSOR
  return at_npu::native::OpPreparation::apply_tensor_without_format(sizes, options);
#else
  return at::empty(sizes, options);
#endif
}

#if NPU_EXT_OP_API_EXTENSION

void* op_api_symbol(const char* name) { return GetOpApiFuncAddr(name); }

namespace {
using MemCtxFn = int (*)(void*, bool);
using MemFn = void (*)(void*, bool);
using CacheFn = void (*)();
}  // namespace

void mem_ctx_init() {
  static const auto f = reinterpret_cast<MemCtxFn>(GetOpApiFuncAddr("InitHugeMemThreadLocal"));
  if (f != nullptr) f(nullptr, false);
}

void mem_ctx_release() {
  static const auto f = reinterpret_cast<MemFn>(GetOpApiFuncAddr("ReleaseHugeMem"));
  if (f != nullptr) f(nullptr, false);
}

void mem_ctx_uninit() {
  static const auto uninit = reinterpret_cast<MemFn>(GetOpApiFuncAddr("UnInitHugeMemThreadLocal"));
  static const auto uninit_cache = reinterpret_cast<CacheFn>(GetOpApiFuncAddr("UnInitPTACacheThreadLocal"));
  if (uninit != nullptr) uninit(nullptr, false);
  if (uninit_cache != nullptr) uninit_cache();
}


const char* aclnn_layer() {
#if NPU_EXT_HIT_CACHE_LEVEL
  return "torch_npu's op-plugin extension API (executor cache, deterministic level, task queue)";
#else
  return "torch_npu's op-plugin extension API (executor cache, deterministic setting, task queue)";
#endif
}

#else

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return !path.empty() && path.size() < PATH_MAX && realpath(path.c_str(), buf) != nullptr ? std::string(buf) : "";
}

// op-plugin's checkOwner: a library of another user is skipped (root may use only root's; another user his own or
// root's).
bool owner_ok(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return false;
  const uid_t me = getuid();
  if (me != 0 && info.st_uid == 0) return true;
  return !((me == 0 && info.st_uid != 0) || (me != 0 && me != info.st_uid));
}

// The custom operator packages' libcust_opapi.so in `dirs` order; the first one missing ends the list (as
// op-plugin's `break`).
void add_custom(const std::vector<std::string>& dirs, std::vector<void*>& out) {
  for (const std::string& dir : dirs) {
    const std::string lib = real_path(dir + "/libcust_opapi.so");
    if (lib.empty()) break;
    if (!owner_ok(lib)) continue;
    if (void* h = dlopen(lib.c_str(), RTLD_LAZY)) out.push_back(h);
  }
}

// CANN's operator libraries, in the order op-plugin's GetOpApiFuncAddr searches them on torch_npu 2.6 (op-plugin
// branch 6.0.0, op_plugin/utils/op_api_common.{h,cpp}):
//   1. the custom operator packages named by ASCEND_CUSTOM_OPP_PATH (":"-separated, <path>/op_api/lib);
//   2. the vendor packages listed by $ASCEND_OPP_PATH/vendors/config.ini's load_priority= (",", each
//      <vendors>/<name>/op_api/lib);
//   3. libopapi.so;
//   4. the feature libraries libaclnn_ops_infer.so, libaclnn_ops_train.so, libaclnn_math.so, libaclnn_sparse.so,
//      libaclnn_fft.so, libaclnn_rand.so.
const std::vector<void*>& op_api_libraries() {
  static const std::vector<void*> libs = [] {
    std::vector<void*> out;
    if (const char* env = std::getenv("ASCEND_CUSTOM_OPP_PATH")) {
      std::vector<std::string> dirs;
      for (const std::string& p : split(env, ':')) dirs.push_back(p + "/op_api/lib/");
      add_custom(dirs, out);
    }
    if (const char* opp = std::getenv("ASCEND_OPP_PATH")) {
      const std::string vendors = std::string(opp) + "/vendors";
      std::ifstream config(real_path(vendors + "/config.ini"));
      std::string line;
      while (std::getline(config, line)) {
        if (line.rfind("load_priority=", 0) != 0) continue;
        std::vector<std::string> dirs;
        for (const std::string& name : split(line.substr(std::strlen("load_priority=")), ',')) {
          dirs.push_back(real_path(vendors + "/" + name + "/op_api/lib/"));
        }
        add_custom(dirs, out);
        break;
      }
    }
    for (const char* name : {"libopapi.so", "libaclnn_ops_infer.so", "libaclnn_ops_train.so", "libaclnn_math.so",
                             "libaclnn_sparse.so", "libaclnn_fft.so", "libaclnn_rand.so"}) {
      if (void* h = dlopen(name, RTLD_LAZY)) out.push_back(h);
    }
    return out;
  }();
  return libs;
}

template <typename Fn>
Fn symbol(const char* name) {
  return reinterpret_cast<Fn>(op_api_symbol(name));
}

c10::optional<aclDataType> acl_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ACL_FLOAT;
    case at::kHalf: return ACL_FLOAT16;
    case at::kBFloat16: return ACL_BF16;
    case at::kDouble: return ACL_DOUBLE;
    case at::kInt: return ACL_INT32;
    case at::kLong: return ACL_INT64;
    case at::kBool: return ACL_BOOL;
    case at::kByte: return ACL_UINT8;
    case at::kChar: return ACL_INT8;
    case at::kShort: return ACL_INT16;
    default: return c10::nullopt;
  }
}

}  // namespace

void* op_api_symbol(const char* name) {
  for (void* lib : op_api_libraries()) {
    if (void* f = dlsym(lib, name)) return f;
  }
  return nullptr;
}

const char* aclnn_layer() {
  return "CANN's C API with torch_npu's task queue (OpCommand::RunOpApiV2; this torch_npu ships no op-plugin "
         "extension API; no executor cache)";
}

namespace portable {

// op-plugin's conversion of a base-format tensor: the storage base as the data, the storage offset, the view's sizes
// and strides in elements, the storage as one dimension, and the format NCL / NCHW / NCDHW for rank 3 / 4 / 5, else
// ND. Private formats never get here: launch() casts them to their base format first (base_format above).
aclTensor* convert(const at::Tensor& t) {
  using Create = aclTensor* (*)(const int64_t*, uint64_t, aclDataType, const int64_t*, int64_t, aclFormat,
                                const int64_t*, uint64_t, void*);
  static const auto create = symbol<Create>("aclCreateTensor");
  if (create == nullptr) {
    conversion_error() = "aclCreateTensor is not in this CANN's operator libraries";
    return nullptr;
  }
  const auto dtype = acl_dtype(t.scalar_type());
  if (!dtype.has_value()) {
    conversion_error() = std::string("no aclDataType for ") + c10::toString(t.scalar_type());
    return nullptr;
  }
  const int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.itemsize());
  aclFormat format = ACL_FORMAT_ND;
  switch (t.dim()) {
    case 3: format = ACL_FORMAT_NCL; break;
    case 4: format = ACL_FORMAT_NCHW; break;
    case 5: format = ACL_FORMAT_NCDHW; break;
    default: break;
  }
  aclTensor* out = create(t.sizes().data(), t.sizes().size(), *dtype, t.strides().data(), t.storage_offset(),
                          format, &storage_elems, 1, const_cast<void*>(t.storage().data()));
  if (out == nullptr) conversion_error() = "aclCreateTensor returned null";
  return out;
}

void release(aclTensor* t) {
  using Destroy = int (*)(const aclTensor*);
  static const auto destroy = symbol<Destroy>("aclDestroyTensor");
  if (t != nullptr && destroy != nullptr) destroy(t);
}

// On every launch, whatever was set before: torch_npu's own operators set the same context option through their
// own bookkeeping (SetDeterministic, internal to libtorch_npu.so on 2.6), so a cache of what this code set last
// would miss their changes (on, then a torch_npu operator with it off, then on: launched without it).
void apply_deterministic() {
  const int want = at::globalContext().deterministicAlgorithms() ? 1 : 0;
  const aclError err = aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, want);
  TORCH_CHECK(err == ACL_SUCCESS, "npu_ext: aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, ", want,
              ") failed with ", err);
}

namespace {
using MemCtx = int (*)(void*, bool);
using MemUninit = void (*)(void*, bool);
}  // namespace

void mem_ctx_init() {
  static const auto f = symbol<MemCtx>("InitHugeMemThreadLocal");
  if (f != nullptr) f(nullptr, false);
}

void mem_ctx_uninit() {
  static const auto f = symbol<MemUninit>("UnInitHugeMemThreadLocal");
  if (f != nullptr) f(nullptr, false);
}

void mem_release() {
  static const auto f = symbol<MemUninit>("ReleaseHugeMem");
  if (f != nullptr) f(nullptr, false);
}

aclrtStream current_stream() { return c10_npu::getCurrentNPUStream().stream(false); }

at::Tensor workspace(uint64_t size) {
  const auto device = at::Device(c10::DeviceType::PrivateUse1, c10_npu::getCurrentNPUStream().device_index());
  return at::empty({static_cast<int64_t>(size)}, at::TensorOptions().dtype(at::kByte).device(device));
}

void enqueue(const char* name, const std::function<int()>& task) {
  at_npu::native::OpCommand::RunOpApiV2(name, task);
}

}  // namespace portable

#endif

std::string& conversion_error() {
  static thread_local std::string error;
  return error;
}

void destroy_executor(aclOpExecutor* executor) {
  using Destroy = int (*)(aclOpExecutor*);
  static const auto destroy = reinterpret_cast<Destroy>(op_api_symbol("aclDestroyAclOpExecutor"));
  if (executor != nullptr && destroy != nullptr) destroy(executor);
}

}  // namespace compat
}  // namespace npu
}  // namespace npu_ext
