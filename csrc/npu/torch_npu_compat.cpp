// The torch_npu-release-dependent functions of npu/torch_npu_compat.h (see there).
#include "npu/torch_npu_compat.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#if NPU_EXT_TORCH_NPU_VERSION < 207
#include <acl/acl.h>
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#endif

namespace npu_ext {
namespace npu {
namespace compat {

#if NPU_EXT_TORCH_NPU_VERSION >= 207

void* op_api_symbol(const char* name) { return GetOpApiFuncAddr(name); }

const char* aclnn_layer() {
#if NPU_EXT_TORCH_NPU_VERSION >= 213
  return "torch_npu's op-plugin extension API (executor cache, deterministic level, task queue)";
#else
  return "torch_npu's op-plugin extension API (executor cache, deterministic setting, task queue)";
#endif
}

#else

namespace {

// CANN's operator libraries, in op-plugin's order: the custom operator packages named by
// ASCEND_CUSTOM_OPP_PATH (<path>/op_api/lib/libcust_opapi.so, first path first), then libopapi.so.
const std::vector<void*>& op_api_libraries() {
  static const std::vector<void*> libs = [] {
    std::vector<void*> out;
    if (const char* env = std::getenv("ASCEND_CUSTOM_OPP_PATH")) {
      std::string paths(env);
      size_t start = 0;
      while (start <= paths.size()) {
        const size_t end = std::min(paths.find(':', start), paths.size());
        const std::string dir = paths.substr(start, end - start);
        if (!dir.empty()) {
          if (void* h = dlopen((dir + "/op_api/lib/libcust_opapi.so").c_str(), RTLD_LAZY)) out.push_back(h);
        }
        start = end + 1;
      }
    }
    if (void* h = dlopen("libopapi.so", RTLD_LAZY)) out.push_back(h);
    return out;
  }();
  return libs;
}

template <typename Fn>
Fn symbol(const char* name) {
  return reinterpret_cast<Fn>(op_api_symbol(name));
}

aclDataType acl_dtype(at::ScalarType t) {
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
    default: TORCH_CHECK(false, "npu_ext: no aclDataType for ", t);
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
  return "CANN's C API with torch_npu's task queue (OpCommand::RunOpApiV2; torch_npu 2.6 exports no op-plugin "
         "extension API; no executor cache)";
}

namespace portable {

// op-plugin's conversion: the storage base as the data, the storage offset, the view's sizes and strides in
// elements, the storage as one dimension, and the format NCL / NCHW / NCDHW for rank 3 / 4 / 5, else ND.
aclTensor* convert(const at::Tensor& t) {
  using Create = aclTensor* (*)(const int64_t*, uint64_t, aclDataType, const int64_t*, int64_t, aclFormat,
                                const int64_t*, uint64_t, void*);
  static const auto create = symbol<Create>("aclCreateTensor");
  TORCH_CHECK(create != nullptr, "npu_ext: aclCreateTensor is not in this CANN's operator libraries");
  const int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.itemsize());
  aclFormat format = ACL_FORMAT_ND;
  switch (t.dim()) {
    case 3: format = ACL_FORMAT_NCL; break;
    case 4: format = ACL_FORMAT_NCHW; break;
    case 5: format = ACL_FORMAT_NCDHW; break;
    default: break;
  }
  return create(t.sizes().data(), t.sizes().size(), acl_dtype(t.scalar_type()), t.strides().data(),
                t.storage_offset(), format, &storage_elems, 1, const_cast<void*>(t.storage().data()));
}

void release(aclTensor* t) {
  using Destroy = int (*)(const aclTensor*);
  static const auto destroy = symbol<Destroy>("aclDestroyTensor");
  if (t != nullptr && destroy != nullptr) destroy(t);
}

void apply_deterministic() {
  static std::mutex mu;
  static int applied = -1;  // not yet
  const int want = at::globalContext().deterministicAlgorithms() ? 1 : 0;
  std::lock_guard<std::mutex> lock(mu);
  if (applied == want) return;
  const aclError err = aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, want);
  TORCH_CHECK(err == ACL_SUCCESS, "npu_ext: aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, ", want,
              ") failed with ", err);
  applied = want;
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

}  // namespace compat
}  // namespace npu
}  // namespace npu_ext
