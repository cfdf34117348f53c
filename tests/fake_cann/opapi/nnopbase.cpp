// TEST-ONLY nnopbase object API of the fake libopapi.so (aclCreateTensor & co., as op-plugin's ConvertType calls
// them: storage base pointer, offset, view dims and strides in elements, storage dims) and the test hooks.
#include "fake_opapi.h"

using namespace fake;

extern "C" {

// --- tensor descriptors -------------------------------------------------------------------------------------
aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, int32_t dataType, const int64_t* stride,
                           int64_t offset, int32_t format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
  count("aclCreateTensor");
  count("format " + std::to_string(format) + " rank " + std::to_string(viewDimsNum));
  if (g_fail_create_tensor > 0 && --g_fail_create_tensor == 0) return nullptr;  // injected (test hook)
  if ((viewDimsNum > 0 && (viewDims == nullptr || stride == nullptr)) ||
      (storageDimsNum > 0 && storageDims == nullptr)) {
    return nullptr;
  }
  auto* t = new aclTensor;
  t->sizes.assign(viewDims, viewDims + viewDimsNum);
  t->strides.assign(stride, stride + viewDimsNum);
  t->dtype = dataType;
  t->offset = offset;
  t->format = format;
  t->storage_dims.assign(storageDims, storageDims + storageDimsNum);
  t->storage_elems = 1;
  for (uint64_t i = 0; i < storageDimsNum; ++i) t->storage_elems *= storageDims[i];
  t->data = tensorData;
  live("aclTensor", 1);
  return t;
}

int aclDestroyTensor(const aclTensor* tensor) {
  count("aclDestroyTensor");
  if (tensor == nullptr) return kSuccess;  // as in aclnn
  if (tensor->pinned) {  // a cached executor's: it stays, the cache's own
    auto* kept = const_cast<aclTensor*>(tensor);
    if (!kept->released) live("aclTensor", -1);
    kept->released = true;
    return kSuccess;
  }
  live("aclTensor", -1);
  delete tensor;
  return kSuccess;
}


aclScalar* aclCreateScalar(void* value, int32_t dataType) {
  const int64_t size = dataType == 17 ? 16 : itemsize(dataType);  // 17: ACL_COMPLEX128
  if (value == nullptr || size == 0) return nullptr;
  auto* s = new aclScalar;
  s->dtype = dataType;
  std::memset(s->value, 0, sizeof(s->value));
  std::memcpy(s->value, value, static_cast<size_t>(size));
  return s;
}
int aclDestroyScalar(const aclScalar* scalar) {
  delete scalar;
  return kSuccess;
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return new aclIntArray{std::vector<int64_t>(value, value + size)};
}
int aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return kSuccess;
}

aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
  return new aclFloatArray{std::vector<float>(value, value + size)};
}
int aclDestroyFloatArray(const aclFloatArray* array) {
  delete array;
  return kSuccess;
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  return new aclBoolArray{std::vector<bool>(value, value + size)};
}
int aclDestroyBoolArray(const aclBoolArray* array) {
  delete array;
  return kSuccess;
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  return new aclTensorList{std::vector<const aclTensor*>(value, value + size)};
}
int aclDestroyTensorList(const aclTensorList* list) {
  if (list != nullptr) {
    for (const aclTensor* t : list->tensors) aclDestroyTensor(t);
  }
  delete list;
  return kSuccess;
}

aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size) {
  return new aclScalarList{std::vector<const aclScalar*>(value, value + size)};
}
int aclDestroyScalarList(const aclScalarList* list) {
  if (list != nullptr) {
    for (const aclScalar* s : list->scalars) delete s;
  }
  delete list;
  return kSuccess;
}

// The view shape an operator with a data-dependent output shape set (op-plugin frees the array with delete[]).
int aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum) {
  if (tensor == nullptr || viewDims == nullptr || viewDimsNum == nullptr) return kNullptr;
  *viewDimsNum = tensor->sizes.size();
  *viewDims = new int64_t[tensor->sizes.size() + 1];
  std::copy(tensor->sizes.begin(), tensor->sizes.end(), *viewDims);
  return kSuccess;
}

// Executors are deleted by their launch (phase 2); one that is never launched is released here (one the executor
// cache keeps stays).
int aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (executor != nullptr) launched(reinterpret_cast<Executor*>(executor));
  return kSuccess;
}

// --- the thread-local memory context (nnopbase's huge-memory pool, as op-plugin's InitExecCommonCtx /
// UnInitExecCommonCtx / ReleaseExecCommonCtx call it): counted as "live memory context" while a thread holds one.
namespace {
thread_local bool t_mem_ctx = false;
}  // namespace

int InitHugeMemThreadLocal(void*, bool) {
  if (!t_mem_ctx) live("memory context", 1);
  t_mem_ctx = true;
  return kSuccess;
}

void UnInitHugeMemThreadLocal(void*, bool) {
  if (t_mem_ctx) live("memory context", -1);
  t_mem_ctx = false;
}

void ReleaseHugeMem(void*, bool) {}

// --- test hooks (not aclnn API) ---------------------------------------------------------------------------------
// fake_opapi_calls(name): calls of an entry point (either phase, by its name) and aclCreateTensor's formats as
// "format <code> rank <n>"; fake_opapi_reset() clears them; fake_opapi_dump() lists them all; fake_opapi_last_error() is the last rejection reason.
int fake_opapi_calls(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_calls.find(name);
  return it == g_calls.end() ? 0 : it->second;
}

// Clears the counters (the "live ..." ones stay: they count objects, not calls) and the executor cache.
void fake_opapi_reset() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_calls.begin(); it != g_calls.end();) {
      it = it->first.rfind("live ", 0) == 0 ? std::next(it) : g_calls.erase(it);
    }
  }
  if (g_cache_clear != nullptr) g_cache_clear();
}

// fake_opapi_dump(): every counter as "name=count" lines (for finding which operators a call launched).
const char* fake_opapi_dump() {
  static thread_local std::string text;
  std::lock_guard<std::mutex> lock(g_mu);
  text.clear();
  for (const auto& kv : g_calls) text += kv.first + "=" + std::to_string(kv.second) + "\n";
  return text.c_str();
}

// Failure injection: the n-th aclCreateTensor from now returns null (0 disarms).
void fake_opapi_fail_create_tensor(int n) { g_fail_create_tensor = n; }

const char* fake_opapi_last_error() {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(g_mu);
  copy = g_last_error;
  return copy.c_str();
}

}  // extern "C"
