// TEST-ONLY _foreach_* aclnn operators of the fake libopapi.so: what torch_npu calls for torch.optim's default
// (foreach) path on npu parameters, SGD with momentum and Adam / AdamW. op-plugin (Ascend/op-plugin
// op_plugin/ops/opapi/Foreach*KernelNpuOpApi.cpp) takes them on SoCs with "ND out" (Atlas A2/A3, Ascend950; older ones
// run ATen's per-tensor slow path), when ATen's can_use_fast_route holds (same device, dtype and layout), in chunks of
// at most 16 to 48 tensors per launch. Its DO_COMPATIBILITY tries the V2 operator first, whose scalar is an aclScalar
// (the Python number as a double), and falls back to V1, whose scalar is a one-element device tensor of the list's
// dtype (copy_scalar_to_device: the scalar rounded to that dtype first), both modelled:
//   aclnnForeachAddListV2 / aclnnForeachAddList    (x1, x2, alpha, out)      out = x1 + alpha * x2
//   aclnnForeachAddScalarV2 / aclnnForeachAddScalar (x, scalar, out)       out = x + scalar
//   aclnnForeachMulScalarV2 / aclnnForeachMulScalar (x, scalar, out)       out = x * scalar
//   aclnnForeachAddcmulScalarV2 / aclnnForeachAddcmulScalar (x, t1, t2, value, out)  out = x + value * t1 * t2
//   aclnnForeachLerpScalar (x1, x2, aclScalar weight, out)                  out = lerp(x1, x2, weight)
//   aclnnForeachDivScalarList (x, aclScalarList, out)                        out_i = x_i / scalar_i
//   aclnnForeachSqrt (x, out)                                                out = sqrt(x)
// The in-place ATen ops pass their input list as out. Each tensor is computed by the CPU ATen op of the same formula
// (for fp16 / bf16 the CPU op's fp32 arithmetic, rounded once), which is what the CPU optimizer's per-tensor path
// runs; the real kernels' arithmetic order per element is not in the sources available here.
// Phase 1 refuses (161002) lists of different lengths or a tensor whose shape or dtype differs from its partners'.
#include <initializer_list>
#include <string>

#include "aten_ops.h"

namespace fake {
namespace {

// The lists' tensors pair up: equal lengths, and each position the same shape and dtype in every list.
bool lists_match(std::initializer_list<const aclTensorList*> lists) {
  const aclTensorList* first = *lists.begin();
  for (const aclTensorList* l : lists) {
    if (l == nullptr || l->tensors.size() != first->tensors.size()) return false;
    for (size_t i = 0; i < l->tensors.size(); ++i) {
      const aclTensor* a = l->tensors[i];
      const aclTensor* b = first->tensors[i];
      if (a == nullptr || b == nullptr || a->sizes != b->sizes || a->dtype != b->dtype) return false;
    }
  }
  return true;
}

// Phase 1 of a foreach operator over `lists` (the output last): checks them and queues out_i = fn(i).
int foreach_phase1(const char* api, std::initializer_list<const aclTensorList*> lists, const aclTensorList* out,
                   std::function<at::Tensor(size_t)> fn, uint64_t* workspace_size, aclOpExecutor** executor) {
  for (const aclTensorList* l : lists) {
    if (l == nullptr) {
      count(std::string(api) + "GetWorkspaceSize");
      return reject(kNullptr, std::string(api) + ": a tensor list is a null pointer.");
    }
  }
  if (out == nullptr || !lists_match(lists) || !lists_match({*lists.begin(), out})) {
    count(std::string(api) + "GetWorkspaceSize");
    return reject(kInvalid, std::string(api) + ": the tensor lists differ in length, or a tensor in shape or dtype "
                                               "from its partners.");
  }
  return queue(api, [=]() {
    // every result first, then the writes: an in-place call passes an input list as out
    std::vector<at::Tensor> results;
    for (size_t i = 0; i < out->tensors.size(); ++i) results.push_back(fn(i));
    for (size_t i = 0; i < out->tensors.size(); ++i) W(out->tensors[i], results[i]);
  }, workspace_size, executor);
}

at::Tensor E(const aclTensorList* l, size_t i) { return T(l->tensors[i]); }

// V1's scalar: the one-element device tensor's value (already of the list's dtype).
at::Scalar V(const aclTensor* scalar) { return T(scalar).reshape({-1})[0].item(); }

}  // namespace
}  // namespace fake

using namespace fake;

#define FOREACH_OP(NAME, PARAMS, LISTS, OUT, EXPR)                                                      \
  int aclnn##NAME##GetWorkspaceSize PARAMS {                                                            \
    return foreach_phase1("aclnn" #NAME, LISTS, OUT, [=](size_t i) { return EXPR; }, workspaceSize,      \
                          executor);                                                                    \
  }                                                                                                     \
  int aclnn##NAME(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {           \
    return phase2("aclnn" #NAME, workspace, workspaceSize, executor);                                   \
  }

#define LISTS(...) (std::initializer_list<const aclTensorList*>{__VA_ARGS__})

extern "C" {

FOREACH_OP(ForeachAddListV2, (const aclTensorList* x1, const aclTensorList* x2, const aclScalar* alpha,
                              aclTensorList* out, WS),
           LISTS(x1, x2), out, at::add(E(x1, i), E(x2, i), S(alpha)))
FOREACH_OP(ForeachAddList, (const aclTensorList* x1, const aclTensorList* x2, const aclTensor* alpha,
                            aclTensorList* out, WS),
           LISTS(x1, x2), out, at::add(E(x1, i), E(x2, i), V(alpha)))
FOREACH_OP(ForeachAddScalarV2, (const aclTensorList* x, const aclScalar* scalar, aclTensorList* out, WS),
           LISTS(x), out, at::add(E(x, i), S(scalar)))
FOREACH_OP(ForeachAddScalar, (const aclTensorList* x, const aclTensor* scalar, aclTensorList* out, WS),
           LISTS(x), out, at::add(E(x, i), V(scalar)))
FOREACH_OP(ForeachMulScalarV2, (const aclTensorList* x, const aclScalar* scalar, aclTensorList* out, WS),
           LISTS(x), out, at::mul(E(x, i), S(scalar)))
FOREACH_OP(ForeachMulScalar, (const aclTensorList* x, const aclTensor* scalar, aclTensorList* out, WS),
           LISTS(x), out, at::mul(E(x, i), V(scalar)))
FOREACH_OP(ForeachAddcmulScalarV2, (const aclTensorList* x, const aclTensorList* t1, const aclTensorList* t2,
                                    const aclScalar* value, aclTensorList* out, WS),
           LISTS(x, t1, t2), out, at::addcmul(E(x, i), E(t1, i), E(t2, i), S(value)))
FOREACH_OP(ForeachAddcmulScalar, (const aclTensorList* x, const aclTensorList* t1, const aclTensorList* t2,
                                  const aclTensor* value, aclTensorList* out, WS),
           LISTS(x, t1, t2), out, at::addcmul(E(x, i), E(t1, i), E(t2, i), V(value)))
FOREACH_OP(ForeachLerpScalar, (const aclTensorList* x1, const aclTensorList* x2, const aclScalar* weight,
                               aclTensorList* out, WS),
           LISTS(x1, x2), out, at::lerp(E(x1, i), E(x2, i), S(weight)))
FOREACH_OP(ForeachSqrt, (const aclTensorList* x, aclTensorList* out, WS), LISTS(x), out, at::sqrt(E(x, i)))

// one scalar per tensor: a list of another length is refused too
int aclnnForeachDivScalarListGetWorkspaceSize(const aclTensorList* x, const aclScalarList* scalars,
                                              aclTensorList* out, WS) {
  if (x != nullptr && (scalars == nullptr || scalars->scalars.size() != x->tensors.size())) {
    count("aclnnForeachDivScalarListGetWorkspaceSize");
    return reject(kInvalid, "aclnnForeachDivScalarList: the scalar list's length differs from the tensor list's.");
  }
  return foreach_phase1("aclnnForeachDivScalarList", LISTS(x), out,
                        [=](size_t i) { return at::div(E(x, i), S(scalars->scalars[i])); }, workspaceSize, executor);
}
int aclnnForeachDivScalarList(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnForeachDivScalarList", workspace, workspaceSize, executor);
}

}  // extern "C"
