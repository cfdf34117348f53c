// TEST-ONLY: what every source of the fake libopapi.so shares (the nnopbase objects, status codes, element
// access through a descriptor, the SoC and kernel tables, the two-phase executor). Used by the fake CANN of
// `make test-npu` (tests/fake_cann) and by the host stand-in that runs the NPU sources under the aarch64
// emulation (tests/npu_stub).
//
// Status codes as the real operators: 0 success, 161001 (ACLNN_ERR_PARAM_NULLPTR) for a null required
// argument, 161002 (ACLNN_ERR_PARAM_INVALID) for an invalid one (dtype, rank, shape, descriptor, option),
// 561xxx (ACLNN_ERR_INNER*) for internal failures (opbase include/nnopbase/opdev/op_errno.h).
// The SoC is $NPU_FAKE_SOC (default Ascend910B3 = Atlas A2; A3 = Ascend910_93*; Ascend950 = Ascend950PR_* /
// Ascend950DT_*, or Ascend910_95* as older toolchains name the same chips); $NPU_FAKE_NO_KERNEL (comma-separated
// kernel names) removes kernels for this SoC, as an older CANN whose op package predates the SoC's config.
//
// The operator families' models: one file each, ops/<family>.cpp (the folder names of csrc/ops/), holding the
// family's forward and backward aclnn entry points with the published C signatures (docs/operators.md, "The aclnn
// calls"):
//   aclnnStatus aclnnXxxGetWorkspaceSize(<op args>, uint64_t* workspaceSize, aclOpExecutor** executor)
//   aclnnStatus aclnnXxx(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream)
// and one OpFamily object (below) declaring its kernels per SoC and its extension APIs; build.py and the stand-in
// (tests/npu_stub/npu_standin_build.py) compile every ops/*.cpp, so a new family needs no edit elsewhere here.
// What every model shares:
//   * tensors are read and written ONLY through their aclTensor descriptors (view sizes, strides and offset in
//     elements, dtype code, storage base pointer), so a wrong argument order, dtype code or stride shows up as a
//     wrong result or a non-zero status; inputs of any strides are read correctly (aclnn makes them contiguous);
//   * the math is an independent plain C++ implementation written from the operator contract (docs/operators.md;
//     it does not call the package's kernels or PyTorch), computing what the real kernels compute as the CANN
//     sources show them (ops-nn, ops-math, opbase; docs/npu.md), not as documented: fp16/bf16 widened to fp32,
//     computed in fp32 and rounded once (round-to-nearest-even) unless a model says otherwise; reductions accumulate
//     in fp32, in a workspace requested from phase 1; like aclnn, outputs of reductions over nothing are left
//     untouched (the NPU path must zero-fill them);
//   * a missing kernel (has_kernel) fails as the real framework does: a generated operator in phase 1 with 561003
//     (no_kernel), a hand-written one at its launch (Executor::kernel_missing: 561000, nothing written);
//   * a rejected phase 1 leaves the executor null; phase 2 with a null executor returns 161001;
//   * kernel counting (fake_opapi_calls("kernels")): each launch is one kernel, plus one for every input the
//     operator has to make contiguous first (aclnn's l0op::Contiguous: a transposed, sliced or expanded input is a
//     copy kernel; copies()).
#pragma once

#include <algorithm>
#include <atomic>
#include <initializer_list>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/syscall.h>

#include "../float16.h"
#include <unistd.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "formats.h"

namespace fake {

inline constexpr int kSuccess = 0;
inline constexpr int kNullptr = 161001;
inline constexpr int kInvalid = 161002;
inline constexpr int kInner = 561000;           // ACLNN_ERR_INNER: a kernel launch that failed
inline constexpr int kTilingError = 561002;     // ACLNN_ERR_INNER_TILING_ERROR
inline constexpr int kFindKernelError = 561003;  // ACLNN_ERR_INNER_FIND_KERNEL_ERROR
inline constexpr int kInternal = 561103;        // ACLNN_ERR_INNER_NULLPTR (the model refusing an out-of-bounds access)
inline constexpr int kInternalNullptr = 561103;  // ACLNN_ERR_INNER_NULLPTR (a null the operator dereferences)

enum DType : int32_t { F32 = 0, F16 = 1, I32 = 3, I64 = 9, F64 = 11, BOOL = 12, BF16 = 27 };
inline constexpr int64_t kMaxDims = 8;

}  // namespace fake

struct aclOpExecutor;  // opaque; the fake's executors are fake::Executor objects

struct aclTensor {
  std::vector<int64_t> sizes, strides;
  int32_t dtype;
  int64_t offset;
  int32_t format;
  std::vector<int64_t> storage_dims;  // as given (op-plugin: the storage as one dimension, or a private format's)
  int64_t storage_elems;
  void* data;
  bool pinned = false;    // kept by a cached executor (pta_cache.cpp): aclDestroyTensor leaves it alive
  bool released = false;  // a pinned one the caller destroyed (no longer "live": the cache's own now)
};

struct aclScalar {
  int32_t dtype;
  alignas(16) unsigned char value[16];  // double, int64, bool or complex128, as op-plugin passes them
};
struct aclIntArray { std::vector<int64_t> values; };
struct aclFloatArray { std::vector<float> values; };
struct aclBoolArray { std::vector<bool> values; };
struct aclTensorList { std::vector<const aclTensor*> tensors; };  // owns the tensors
struct aclScalarList { std::vector<const aclScalar*> scalars; };  // owns the scalars

namespace fake {

inline std::mutex g_mu;
inline std::map<std::string, int> g_calls;

inline std::string g_last_error;
inline std::atomic<int> g_fail_create_tensor{0};  // fake_opapi_fail_create_tensor

inline void count(const std::string& name, int n = 1) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls[name] += n;
}

// The calling thread's kernel id (what Python's threading.get_native_id() answers), for the per-thread counters.
inline long thread_id() { return static_cast<long>(syscall(SYS_gettid)); }

// Records a rejection reason and returns the status (OP_LOGE + return in aclnn).
inline int reject(int status, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_last_error = why;
  return status;
}

inline std::string soc() {
  const char* env = std::getenv("NPU_FAKE_SOC");
  return env != nullptr ? env : "Ascend910B3";
}

inline bool soc_is(const char* prefix) { return soc().rfind(prefix, 0) == 0; }
inline bool soc_950() { return soc_is("Ascend950") || soc_is("Ascend910_95"); }
inline bool soc_a2_a3() { return soc_is("Ascend910B") || soc_is("Ascend910_93"); }
inline bool soc_a2_a3_950() { return soc_a2_a3() || soc_950(); }

// --- the operator families' declarations (ops/<family>.cpp) --------------------------------------------------
// Each family's file declares, with one OpFamily object at namespace scope, the kernels (L0 ops) its models look up
// and the SoCs whose op package has them (what has_kernel() answers), and its aclnn APIs that are the extension's
// (CanUsePTACache answers true for them, pta_cache.cpp), each with whether nnopbase caches its executor (a composite
// op_api, CREATE_EXECUTOR(): kCached; a generated operator: kNotCached). The registries are function-local statics
// (made on first use, whatever the order the families' objects are initialised in), filled while the library loads
// and only read after.
enum SocSet : unsigned {
  kSocA2 = 1u << 0,     // Ascend910B* (Atlas A2)
  kSocA3 = 1u << 1,     // Ascend910_93* (Atlas A3)
  kSoc950 = 1u << 2,    // Ascend950* (or Ascend910_95*, as older toolchains name it)
  kSoc310P = 1u << 3,   // Ascend310P*
  kSocOther = 1u << 4,  // any other SoC
  kSocA2A3_950 = kSocA2 | kSocA3 | kSoc950,
  kSocAll = ~0u,
};

inline unsigned soc_set() {
  if (soc_950()) return kSoc950;
  if (soc_is("Ascend910B")) return kSocA2;
  if (soc_is("Ascend910_93")) return kSocA3;
  if (soc_is("Ascend310P")) return kSoc310P;
  return kSocOther;
}

enum ExecutorCache : bool { kNotCached = false, kCached = true };

struct KernelDecl { const char* name; unsigned socs; };    // a kernel and the SoCs (SocSet bits) it exists for
struct ApiDecl { const char* name; ExecutorCache cache; };  // an extension aclnn API (without GetWorkspaceSize)

template <typename V>
struct Declared {  // a registry's entry: the declaring family and what it declared
  std::string family;
  V value;
};
inline std::map<std::string, Declared<unsigned>>& kernel_registry() {
  static std::map<std::string, Declared<unsigned>> kernels;
  return kernels;
}
inline std::map<std::string, Declared<ExecutorCache>>& extension_api_registry() {
  static std::map<std::string, Declared<ExecutorCache>> apis;
  return apis;
}

// Records a declaration. The same family's same declaration again is no error: the library loaded a second time
// (a copy of libopapi.so as an aclnn feature library, tests/npu/test_npu_path_machine.py) runs the families' objects
// again, and the registries, vague-linkage statics, are the process's one copy. Anything else twice is the models'
// error, reported once the library loads.
template <typename V>
inline void declare(std::map<std::string, Declared<V>>& registry, const char* family, const char* what,
                    const char* name, V value) {
  const auto [it, added] = registry.emplace(name, Declared<V>{family, value});
  if (!added && (it->second.family != family || it->second.value != value)) {
    std::fprintf(stderr, "fake libopapi: %s %s is declared by %s and by %s, or twice differently\n", what, name,
                 it->second.family.c_str(), family);
    std::abort();
  }
}

struct OpFamily {
  OpFamily(const char* family, std::initializer_list<KernelDecl> kernels, std::initializer_list<ApiDecl> apis) {
    for (const KernelDecl& k : kernels) declare(kernel_registry(), family, "kernel", k.name, k.socs);
    for (const ApiDecl& a : apis) declare(extension_api_registry(), family, "API", a.name, a.cache);
  }
};

// Whether the installed op package has a kernel of this L0 op for the SoC: its family's declaration, less the
// kernels $NPU_FAKE_NO_KERNEL names (see the header comment). A kernel no family declares is the model's error.
inline bool has_kernel(const std::string& kernel) {
  const char* env = std::getenv("NPU_FAKE_NO_KERNEL");
  if (env != nullptr) {
    std::string list = std::string(",") + env + ",";
    if (list.find("," + kernel + ",") != std::string::npos) return false;
  }
  const auto it = kernel_registry().find(kernel);
  if (it == kernel_registry().end()) {
    std::fprintf(stderr, "fake libopapi: kernel %s is declared by no family (ops/*.cpp)\n", kernel.c_str());
    std::abort();
  }
  return (it->second.value & soc_set()) != 0;
}

// An extension API (CanUsePTACache), and whether nnopbase caches its executor.
inline bool extension_api(const std::string& api) { return extension_api_registry().count(api) != 0; }
inline bool cached_api(const std::string& api) {
  const auto it = extension_api_registry().find(api);
  return it != extension_api_registry().end() && it->second.value == kCached;
}

// Phase 1 of a generated operator whose kernel is missing for the SoC.
inline int no_kernel(const std::string& kernel) {
  return reject(kFindKernelError, "Cannot find binary for op " + kernel + " on " + soc() + ".");
}

inline int64_t itemsize(int32_t dt) {
  switch (dt) {
    case F32: case I32: return 4;
    case F16: case BF16: return 2;
    case I64: case F64: return 8;
    case BOOL: return 1;
    default: return 0;
  }
}

inline std::string dtype_name(int32_t dt) {
  switch (dt) {
    case F32: return "DT_FLOAT";
    case F16: return "DT_FLOAT16";
    case BF16: return "DT_BF16";
    default: return "DT_" + std::to_string(dt);
  }
}

inline bool is_float(const aclTensor* t) { return t->dtype == F32 || t->dtype == F16 || t->dtype == BF16; }

inline int64_t numel(const aclTensor* t) {
  int64_t n = 1;
  for (int64_t s : t->sizes) n *= s;
  return n;
}

// A descriptor is valid when its view lies inside its storage.
inline bool valid(const aclTensor* t) {
  if (itemsize(t->dtype) == 0 || t->sizes.size() > static_cast<size_t>(kMaxDims) || t->offset < 0) return false;
  int64_t last = t->offset;
  for (size_t d = 0; d < t->sizes.size(); ++d) {
    if (t->sizes[d] < 0 || t->strides[d] < 0) return false;
    if (t->sizes[d] == 0) return true;  // empty view: nothing is addressed
    last += (t->sizes[d] - 1) * t->strides[d];
  }
  return t->data != nullptr && last < t->storage_elems;
}

// --- element access through the descriptor ----------------------------------------------------------------
inline char* element(const aclTensor* t, int64_t elem) {
  return static_cast<char*>(t->data) + (t->offset + elem) * itemsize(t->dtype);
}

inline float load(const aclTensor* t, int64_t elem) {
  const char* p = element(t, elem);
  uint16_t u16;
  switch (t->dtype) {
    case F32: { float v; std::memcpy(&v, p, 4); return v; }
    case F16: std::memcpy(&u16, p, 2); return half_to_float(u16);
    case BF16: std::memcpy(&u16, p, 2); return bf16_to_float(u16);
    default: return NAN;
  }
}

inline void store(const aclTensor* t, int64_t elem, float v) {
  char* p = element(t, elem);
  uint16_t u16;
  switch (t->dtype) {
    case F32: std::memcpy(p, &v, 4); return;
    case F16: u16 = float_to_half(v); std::memcpy(p, &u16, 2); return;
    case BF16: u16 = float_to_bf16(v); std::memcpy(p, &u16, 2); return;
    default: return;
  }
}

// v rounded to the dtype (fp16 / bf16: round to nearest even) and widened back.
inline float round_to(int32_t dtype, float v) {
  switch (dtype) {
    case F16: return half_to_float(float_to_half(v));
    case BF16: return bf16_to_float(float_to_bf16(v));
    default: return v;
  }
}

inline bool load_bool(const aclTensor* t, int64_t elem) { return *element(t, elem) != 0; }

// A dense writer's extent: numel elements from the storage offset, whatever the strides.
inline bool dense_fits(const aclTensor* t) { return t->offset + numel(t) <= t->storage_elems; }

inline int64_t load_int(const aclTensor* t, int64_t elem) {
  const char* p = element(t, elem);
  if (t->dtype == I32) { int32_t v; std::memcpy(&v, p, 4); return v; }
  int64_t v; std::memcpy(&v, p, 8); return v;
}

// Element offset (relative to the view's offset) of logical index `idx` of the output shape `shape` in
// operand `t`, NumPy-broadcast (t's dims right-aligned, size-1 dims repeated).
inline int64_t bcast_offset(const aclTensor* t, const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t lead = shape.size() - t->sizes.size();
  for (size_t d = 0; d < t->sizes.size(); ++d) {
    if (t->sizes[d] != 1) off += idx[lead + d] * t->strides[d];
  }
  return off;
}

// Calls fn(idx) for every logical index of `shape`, row-major.
template <typename Fn>
inline void for_each_index(const std::vector<int64_t>& shape, Fn&& fn) {
  for (int64_t s : shape) if (s == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    fn(idx);
    int d = static_cast<int>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

inline bool broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>& out) {
  const size_t n = std::max(a.size(), b.size());
  out.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    const int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

// --- helpers the models of several families (and aten_extra.cpp) share --------------------------------------
// Element offset of row-major index `i` of t's view.
inline int64_t offset_of(const aclTensor* t, int64_t i) {
  int64_t off = 0;
  for (int d = static_cast<int>(t->sizes.size()) - 1; d >= 0; --d) {
    off += (i % t->sizes[d]) * t->strides[d];
    i /= t->sizes[d];
  }
  return off;
}

inline bool same_shape(const aclTensor* a, const aclTensor* b) { return a->sizes == b->sizes; }

// bf16 only on A2/A3/Ascend950 (the forward operators' dtype lists).
inline bool soc_bf16_ok(int32_t dtype) { return dtype != BF16 || soc_a2_a3_950(); }

// --- private storage formats (formats.h) ------------------------------------------------------------------
// What the real operators do with a tensor torch_npu describes in a private format (NZ, 5HD: aclCreateTensor with
// that format and the storage dims), from CANN's sources (ops-nn, ops-math, opbase):
// * aclCreateTensor only warns; IsContiguous is true for a private format, so l0op::Contiguous keeps the tiled
//   buffer and an ND-only kernel reads its first numel elements as if they were row-major. GeluBackwardV2, GeluV2,
//   PreluBackward, Prelu and GroupedBiasAddGrad(V2) give a silently wrong result that way (the fake's kernels read
//   through the view's sizes and strides: the same elements).
// * The generated operators (Logit, LogitGrad, the inner ScaledMaskedSoftmaxV2 / ScaledMaskedSoftmaxGradV2)
//   match each tensor's format against their OpDef, ND only, and reject any other in phase 1 (opdef_formats);
//   aclnnScaledMaskedSoftmaxBackward rejects FRACTAL_NZ before that on SoCs other than Ascend950 (its CheckFormat).
inline bool private_format(const aclTensor* t) { return t != nullptr && !base_format(t->format); }

inline int opdef_formats(std::initializer_list<const aclTensor*> tensors) {
  for (const aclTensor* t : tensors) {
    if (private_format(t)) {
      return reject(kInvalid, "The dtype or format of the actual input or output parameter of the operator is "
                              "inconsistent with that defined in the operator prototype OpDef, details of parameter "
                              "are: format " + format_name(t->format) + ". Supported dtype and format list is: ND.");
    }
  }
  return kSuccess;
}

// --- executors --------------------------------------------------------------------------------------------
struct CacheEntry;  // the executor cache torch_npu drives (pta_cache.cpp; the fake CANN only)

// Live objects, for the leak tests: "live aclTensor" (aclCreateTensor minus the destroyed ones) and "live
// executor" (made by phase 1, not yet deleted by its launch, aclDestroyAclOpExecutor or the cache).
inline void live(const char* what, int delta) { count(std::string("live ") + what, delta); }

struct Executor {
  Executor() { live("executor", 1); }
  virtual ~Executor() {
    if (!released) live("executor", -1);
  }
  bool released = false;  // a cached one its caller is done with (launched or destroyed): the cache's own now
  virtual int run(void* workspace) = 0;
  uint64_t workspace_size = 0;
  bool kernel_missing = false;  // the launch fails (561000) and writes nothing
  bool empty = false;           // nothing to compute: the operator returns before launching a kernel
  int internal_copies = 0;      // inputs the operator makes contiguous first (one copy kernel each)
  // Set when torch_npu's executor cache keeps this executor (the entry's own) or when this is a cache hit's
  // launch of it (addresses: the new call's tensor addresses, in argument order).
  std::shared_ptr<CacheEntry> cache;
  std::vector<void*> addresses;
  bool deterministic = false;  // ACL_OPT_DETERMINISTIC when phase 1 made it (the kernels it chose)
  std::string options;          // "deterministic <v> strong consistency <v>": both options' values then
  int32_t device = -1;          // the device phase 1 made it on (its kernels and tiling are that device's)
};

// The context's ACL_OPT_DETERMINISTIC (aclrtCtxSetSysParamOpt), read from the fake runtime when it is loaded
// (false under the aarch64 stand-in, which has none).
inline int64_t sys_param(int opt) {
  using Get = int64_t (*)(int);
  static const Get get = [] {
    void* rt = dlopen("libascendcl.so", RTLD_NOW | RTLD_NOLOAD);
    return rt != nullptr ? reinterpret_cast<Get>(dlsym(rt, "fake_cann_sys_param")) : nullptr;
  }();
  return get != nullptr ? get(opt) : 0;
}
inline bool deterministic_option() { return sys_param(0) != 0; }

// The thread's device and the device of an address, from the fake runtime (-1 where it is not loaded: the aarch64
// stand-in, whose tensors are host tensors).
inline int32_t current_device() {
  using Get = int (*)(int32_t*);
  static const Get get = [] {
    void* rt = dlopen("libascendcl.so", RTLD_NOW | RTLD_NOLOAD);
    return rt != nullptr ? reinterpret_cast<Get>(dlsym(rt, "fake_cann_device_of")) != nullptr
                               ? reinterpret_cast<Get>(dlsym(rt, "aclrtGetDevice")) : nullptr
                         : nullptr;
  }();
  int32_t d = -1;
  return get != nullptr && get(&d) == 0 ? d : -1;
}
inline int32_t device_of(const void* p) {
  using Of = int32_t (*)(const void*);
  static const Of of = [] {
    void* rt = dlopen("libascendcl.so", RTLD_NOW | RTLD_NOLOAD);
    return rt != nullptr ? reinterpret_cast<Of>(dlsym(rt, "fake_cann_device_of")) : nullptr;
  }();
  return of != nullptr ? of(p) : -1;
}
// "" when every address lies in the thread's device's memory (or in none the runtime allocated), else why not: a
// kernel reads and writes its own device's memory (the fake refuses another device's, which a real one would
// fault on or read over the interconnect).
inline std::string off_device(const std::vector<void*>& addresses) {
  const int32_t here = current_device();
  if (here < 0) return "";
  for (void* p : addresses) {
    const int32_t d = p != nullptr ? device_of(p) : -1;
    if (d >= 0 && d != here) {
      return "a tensor is in device " + std::to_string(d) + "'s memory, the call runs on device " +
             std::to_string(here);
    }
  }
  return "";
}
// ACL_OPT_DETERMINISTIC (0) and ACL_OPT_STRONG_CONSISTENCY (2), what torch_npu's deterministic levels set (2.13:
// level 2 sets the second on a CANN before 9.3, the first to the level from then on): the kernels phase 1 chose.
inline std::string options_now() {
  return "deterministic " + std::to_string(sys_param(0)) + " strong consistency " + std::to_string(sys_param(2));
}

// The executor cache's hooks (set by pta_cache.cpp when it is linked in; the aarch64 stand-in has none).
inline void (*g_cache_phase1)(Executor*, const std::vector<const aclTensor*>&) = nullptr;  // keep it?
inline int (*g_cache_run)(Executor*, void* workspace) = nullptr;  // run with its call's addresses
inline bool (*g_cache_owns)(const Executor*) = nullptr;  // the entry's own executor: never deleted by a launch
inline void (*g_cache_clear)() = nullptr;                   // fake_opapi_reset(): forget every entry

// Whether a view is row-major contiguous (size-1 dims ignored): aclnn's l0op::Contiguous copies any other input.
inline bool contiguous(const aclTensor* t) {
  int64_t expected = 1;
  for (int d = static_cast<int>(t->sizes.size()) - 1; d >= 0; --d) {
    if (t->sizes[d] != 1 && t->strides[d] != expected) return false;
    expected *= t->sizes[d];
  }
  return true;
}

// The copy kernels an operator launches to make these inputs contiguous.
inline int copies(std::initializer_list<const aclTensor*> inputs) {
  int n = 0;
  for (const aclTensor* t : inputs) n += (t != nullptr && numel(t) > 0 && !contiguous(t)) ? 1 : 0;
  return n;
}

// The end of a successful phase 1. `io`: the operator's tensor arguments in its signature's order (nullptr for
// an absent optional one), which torch_npu's executor cache rebinds on a hit; an operator that passes none is
// never cached.
inline int finish_phase1(Executor* e, uint64_t* workspace_size, aclOpExecutor** executor,
                         const std::vector<const aclTensor*>& io = {}) {
  std::vector<void*> addresses;
  for (const aclTensor* t : io) {
    if (t != nullptr) addresses.push_back(t->data);
  }
  const std::string off = off_device(addresses);
  if (!off.empty()) {
    delete e;
    return reject(kInvalid, off);
  }
  e->device = current_device();
  *workspace_size = e->workspace_size;
  *executor = reinterpret_cast<aclOpExecutor*>(e);
  count("phase 1 thread " + std::to_string(thread_id()));  // where phase 1 ran (the caller's or the queue's)
  e->deterministic = deterministic_option();
  e->options = options_now();
  if (g_cache_phase1 != nullptr && io.size() > 0) g_cache_phase1(e, std::vector<const aclTensor*>(io));
  return kSuccess;
}

// Phase 1's end for a forward operator: its inputs' internal contiguous copies, empty when its first input is, then
// finish_phase1 over the inputs and the output.
inline int finish_forward_phase1(Executor* e, uint64_t* workspace_size, aclOpExecutor** executor,
                                 std::initializer_list<const aclTensor*> inputs, const aclTensor* out) {
  e->internal_copies = copies(inputs);
  e->empty = numel(*inputs.begin()) == 0;
  std::vector<const aclTensor*> io(inputs);
  io.push_back(out);
  return finish_phase1(e, workspace_size, executor, io);
}

// A launch (or aclDestroyAclOpExecutor) is done with its executor: deleted, unless the cache keeps it, which then
// no longer counts as the caller's live executor.
inline void launched(Executor* e) {
  if (g_cache_owns == nullptr || !g_cache_owns(e)) {
    delete e;
  } else if (!e->released) {
    e->released = true;
    live("executor", -1);
  }
}

inline int phase2(const char* name, void* workspace, uint64_t workspace_size, aclOpExecutor* executor) {
  count(name);
  if (executor == nullptr) return kNullptr;
  auto* e = reinterpret_cast<Executor*>(executor);
  if (workspace_size != e->workspace_size) { launched(e); return kInvalid; }
  if (workspace_size > 0 && workspace == nullptr) { launched(e); return kNullptr; }
  if (e->kernel_missing) {
    launched(e);
    return reject(kInner, std::string(name) + ": launch failed, no kernel binary.");
  }
  count("launch thread " + std::to_string(thread_id()));
  if (e->device >= 0 && current_device() >= 0 && e->device != current_device()) {  // an executor of another device: its kernels are not here
    launched(e);
    count(std::string("launch on another device ") + name);
    return reject(kInner, std::string(name) + ": the executor was made on device " + std::to_string(e->device) +
                              ", launched on device " + std::to_string(current_device()));
  }
  const std::string off = off_device(e->addresses);  // a cache hit's new addresses
  if (!off.empty()) {
    launched(e);
    return reject(kInvalid, off);
  }
  if (!e->empty) count("kernels", 1 + e->internal_copies);  // the device kernels this call launched
  if (e->deterministic) count(std::string("deterministic launch ") + name);
  count(std::string("launch ") + name + " made with " + e->options);  // the options of the phase 1 that made it
  const int ret = g_cache_run != nullptr ? g_cache_run(e, workspace) : e->run(workspace);
  launched(e);
  return ret;
}


}  // namespace fake
