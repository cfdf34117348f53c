// TEST-ONLY: what the parts of the fake libopapi.so that compute with CPU ATen share (aten.cpp, aten_extra.cpp,
// random.cpp, foreach.cpp): a descriptor as a CPU tensor over its host buffer (no copy), scalars and arrays as ATen
// values, the write through an output's view, and FAKE_OP, one aclnn operator whose phase 1 queues a body that its
// phase 2 runs.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "aten_dtypes.h"
#include "fake_opapi.h"

namespace fake {

inline at::ScalarType scalar_type(int32_t acl) {
  const auto st = aten_type(acl);
  if (!st) throw std::runtime_error("fake opapi: unsupported aclDataType " + std::to_string(acl));
  return *st;
}

// The CPU view of a descriptor (no copy).
inline at::Tensor T(const aclTensor* t) {
  const at::ScalarType st = scalar_type(t->dtype);
  char* base = static_cast<char*>(t->data) + t->offset * static_cast<int64_t>(c10::elementSize(st));
  return at::from_blob(base, t->sizes, t->strides, at::TensorOptions().dtype(st).device(at::kCPU));
}

inline at::Tensor T(const aclTensor* t, bool optional) { return optional && t == nullptr ? at::Tensor() : T(t); }

inline at::Scalar S(const aclScalar* s) {
  double d;
  int64_t i;
  bool b;
  switch (s->dtype) {
    case 11: std::memcpy(&d, s->value, 8); return d;
    case 0: { float f; std::memcpy(&f, s->value, 4); return static_cast<double>(f); }
    case 1: { uint16_t h; std::memcpy(&h, s->value, 2); return static_cast<double>(half_to_float(h)); }
    case 27: { uint16_t h; std::memcpy(&h, s->value, 2); return static_cast<double>(bf16_to_float(h)); }
    case 9: std::memcpy(&i, s->value, 8); return i;
    case 3: { int32_t v; std::memcpy(&v, s->value, 4); return static_cast<int64_t>(v); }
    case 12: std::memcpy(&b, s->value, 1); return b;
    case 17: { double c[2]; std::memcpy(c, s->value, 16); return c10::complex<double>(c[0], c[1]); }
    default: throw std::runtime_error("fake opapi: unsupported aclScalar dtype " + std::to_string(s->dtype));
  }
}

inline at::IntArrayRef A(const aclIntArray* a) { return a == nullptr ? at::IntArrayRef() : at::IntArrayRef(a->values); }

// Writes `value` into the output through its view.
inline void W(const aclTensor* out, const at::Tensor& value) { T(out).copy_(value); }

struct FnExec : Executor {
  std::string name;
  std::function<void()> fn;
  int run(void*) override {
    try {
      fn();
      return kSuccess;
    } catch (const std::exception& e) {
      return reject(kInner, name + ": " + e.what());
    }
  }
};

inline int queue(const char* name, std::function<void()> fn, uint64_t* workspace_size, aclOpExecutor** executor) {
  count(std::string(name) + "GetWorkspaceSize");
  if (workspace_size == nullptr || executor == nullptr) return kNullptr;
  auto* e = new FnExec;
  e->name = name;
  e->fn = std::move(fn);
  return finish_phase1(e, workspace_size, executor);
}

inline std::vector<at::Tensor> tensor_list(const aclTensorList* list) {
  std::vector<at::Tensor> out;
  for (const aclTensor* t : list->tensors) out.push_back(T(t));
  return out;
}

}  // namespace fake

// One aclnn operator: its phase 1 records the descriptors and queues `body`, its phase 2 runs it.
#define FAKE_OP(NAME, PARAMS, ...)                                                                       \
  int aclnn##NAME##GetWorkspaceSize PARAMS {                                                              \
    return queue("aclnn" #NAME, [=]() { __VA_ARGS__; }, workspaceSize, executor);                        \
  }                                                                                                       \
  int aclnn##NAME(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {             \
    return phase2("aclnn" #NAME, workspace, workspaceSize, executor);                                     \
  }

#define WS uint64_t *workspaceSize, aclOpExecutor **executor
