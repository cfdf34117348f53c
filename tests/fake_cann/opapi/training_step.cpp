// TEST-ONLY aclnn operators of the fake libopapi.so that a MindSpeed-LLM pretrain_gpt.py step reaches on the npu
// device beyond aten.cpp's (tests/integrations/test_mindspeed_llm.py; each checked against the CPU in
// tests/npu/test_npu_training_step_ops.py): RoPE's frequencies, cos and sin, the gradient norms (Megatron's check
// and --clip-grad), and MindSpeed's AdamW.
// Computed by CPU ATen over the descriptors' host buffers, like aten.cpp's. The signatures are op-plugin's calls
// (Ascend/op-plugin, op_plugin/ops/opapi/; the same on its 7.x branches, torch_npu 2.7, and on 26.1.0 and master,
// torch_npu 2.13):
//   aclnnCos(self, out), aclnnSin(self, out), aclnnInplaceCos(selfRef), aclnnInplaceSin(selfRef)
//       generated from op_plugin/config/op_plugin_functions.yaml (`exec: aclnnCos`): an integral self gives a
//       float32 out; for fp16 / bf16 computed in fp32 and rounded once (the kernels' internal precision is not in
//       any source available here). Megatron's rotary embedding takes cos and sin of its frequencies. Without them
//       op-plugin's DO_COMPATIBILITY sends an Atlas A2/A3 to the acl_op Cos / Sin, which the fake does not model.
//   aclnnPowScalarTensor(aclScalar self, exponent, out)                              op_plugin_functions.yaml
//   aclnnPowTensorTensor(self, exponent, out)                                       PowKernelNpuOpApi.cpp
//       Megatron's rotary embedding's inverse frequencies, base ** (arange / dim): pow.Scalar, out of
//       result_type(self, exponent); a tensor ** tensor of two npu tensors. As the CPU's at::pow, into out's dtype.
//       Without them, the acl_op Pow.
//   aclnnReciprocal(self, out), aclnnInplaceReciprocal(selfRef)                    op_plugin_functions.yaml
//       `1.0 / t` (the rotary frequencies; the clipping coefficient): an integral self gives float32; 16-bit in
//       fp32, rounded once. Without them, the acl_op Reciprocal.
//   aclnnLinalgVectorNorm(self, aclScalar ord, aclIntArray dim, bool keepdim, aclDataType dtype, out)
//       torch.norm / Tensor.norm / torch.linalg.vector_norm with a numeric p (torch.norm calls vector_norm on the
//       privateuse1 device): Megatron's per-bucket gradient-norm check and MindSpeed's gradient norm for
//       --clip-grad, p = 2 (LinalgNormKernelNpuOpApi.cpp: ord 0, 1, 2, 3, and +-inf from CANN 8.1.RC1, take it;
//       another ord the acl_op LpNormReduceV2 + LpNormUpdateV2 pair, and so does a CANN without it). The ord-norm
//       over `dim` (every dimension when empty), computed in fp32 for 16-bit inputs (fp64 for fp64), rounded once.
//   aclnnApplyAdamWV2(varRef, mRef, vRef, maxGradNormOptionalRef, grad, step, float lr, float beta1, float beta2,
//                     float weightDecay, float eps, bool amsgrad, bool maximize)     FusedAdamWKernelNpuOpApi.cpp
//       torch._fused_adamw_ (MindSpeed's AdamW, mindspeed/optimizer/adamw.py, calls it once per parameter; and
//       torch.optim.AdamW(fused=True)): op-plugin passes state_steps[i].sub(1), a one-element int64 (or fp32)
//       tensor, and the kernel adds the 1 back before the bias corrections (hicann/ops-nn
//       optim/apply_adam_w_v2/tests/assets/golden.py, which this follows): torch's AdamW update, var decayed by
//       (1 - lr * weightDecay) first; all in fp32 (a 16-bit var promotes every tensor, a 16-bit grad only grad and
//       the max), the results rounded once to each tensor's dtype. There is no acl_op fallback: without it
//       torch._fused_adamw_ raises.
// The dropout mask operators (aclnnDropoutGenMaskV2, aclnnDropoutDoMask) are in random.cpp, over its generator.
#include <cmath>
#include <string>

#include "aten_ops.h"

namespace fake {
namespace {

at::Tensor wide(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t;
}

// out = fn(self): integral self as float32, 16-bit in fp32, rounded once into out's dtype.
void unary(const aclTensor* self, const aclTensor* out, at::Tensor (*fn)(const at::Tensor&)) {
  at::Tensor x = T(self);
  x = at::isIntegralType(x.scalar_type(), /*includeBool=*/true) ? x.to(at::kFloat) : wide(x);
  W(out, fn(x));
}

int adamw_phase1(aclTensor* var, aclTensor* m, aclTensor* v, aclTensor* max_v, const aclTensor* grad,
                 const aclTensor* step, float lr, float beta1, float beta2, float weight_decay, float eps, bool amsgrad,
                 bool maximize, uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* api = "aclnnApplyAdamWV2";
  if (var == nullptr || m == nullptr || v == nullptr || grad == nullptr || step == nullptr ||
      (amsgrad && max_v == nullptr)) {
    count(std::string(api) + "GetWorkspaceSize");
    return reject(kNullptr, std::string(api) + ": varRef, mRef, vRef, grad or step is a null pointer (or "
                                               "maxGradNormOptionalRef with amsgrad).");
  }
  if (m->sizes != var->sizes || v->sizes != var->sizes || grad->sizes != var->sizes ||
      (max_v != nullptr && max_v->sizes != var->sizes) || numel(step) != 1) {
    count(std::string(api) + "GetWorkspaceSize");
    return reject(kInvalid, std::string(api) + ": mRef, vRef, grad and maxGradNormOptionalRef must have varRef's "
                                               "shape, step one element.");
  }
  return queue(api, [=]() {
    const bool var_low = var->dtype == F16 || var->dtype == BF16;
    auto f32 = [](const at::Tensor& t) { return t.to(at::kFloat); };
    at::Tensor p = T(var), mt = T(m), vt = T(v), g = f32(T(grad));
    at::Tensor pw = var_low ? f32(p) : p, mw = var_low ? f32(mt) : mt, vw = var_low ? f32(vt) : vt;
    if (maximize) g = -g;
    const double t = T(step).to(at::kDouble).item<double>() + 1.0;  // op-plugin passed step - 1
    const float bias1 = 1.0f - std::pow(beta1, static_cast<float>(t));
    const float bias2_sqrt = std::sqrt(1.0f - std::pow(beta2, static_cast<float>(t)));
    at::Tensor p_new = pw * (1.0f - lr * weight_decay);
    at::Tensor m_new = mw * beta1 + g * (1.0f - beta1);
    at::Tensor v_new = vw * beta2 + g * g * (1.0f - beta2);
    at::Tensor second = v_new;
    if (amsgrad) {
      at::Tensor max_new = at::maximum(f32(T(max_v)), v_new);
      W(max_v, max_new);
      second = max_new;
    }
    const at::Tensor denom = second.sqrt() / bias2_sqrt + eps;
    p_new = p_new - (m_new / denom) * (lr / bias1);
    W(var, p_new);
    W(m, m_new);
    W(v, v_new);
  }, workspace_size, executor);
}

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

FAKE_OP(Cos, (const aclTensor* self, aclTensor* out, WS), unary(self, out, at::cos))
FAKE_OP(Sin, (const aclTensor* self, aclTensor* out, WS), unary(self, out, at::sin))
FAKE_OP(InplaceCos, (aclTensor* selfRef, WS), unary(selfRef, selfRef, at::cos))
FAKE_OP(InplaceSin, (aclTensor* selfRef, WS), unary(selfRef, selfRef, at::sin))

FAKE_OP(PowScalarTensor, (const aclScalar* self, const aclTensor* exponent, aclTensor* out, WS),
        W(out, at::pow(S(self), T(exponent))))
FAKE_OP(PowTensorTensor, (const aclTensor* self, const aclTensor* exponent, aclTensor* out, WS),
        W(out, at::pow(T(self), T(exponent))))

FAKE_OP(Reciprocal, (const aclTensor* self, aclTensor* out, WS), unary(self, out, at::reciprocal))
FAKE_OP(InplaceReciprocal, (aclTensor* selfRef, WS), unary(selfRef, selfRef, at::reciprocal))

FAKE_OP(LinalgVectorNorm, (const aclTensor* self, const aclScalar* ord, const aclIntArray* dim, bool keepdim,
                           int32_t dtype, aclTensor* out, WS),
        W(out, at::linalg_vector_norm(wide(T(self)), S(ord), A(dim), keepdim).to(scalar_type(dtype))))

int aclnnApplyAdamWV2GetWorkspaceSize(aclTensor* varRef, aclTensor* mRef, aclTensor* vRef,
                                      aclTensor* maxGradNormOptionalRef, const aclTensor* grad, const aclTensor* step,
                                      float lr, float beta1, float beta2, float weightDecay, float eps, bool amsgrad,
                                      bool maximize, WS) {
  return adamw_phase1(varRef, mRef, vRef, maxGradNormOptionalRef, grad, step, lr, beta1, beta2, weightDecay, eps,
                      amsgrad, maximize, workspaceSize, executor);
}
int aclnnApplyAdamWV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnApplyAdamWV2", workspace, workspaceSize, executor);
}

}  // extern "C"
