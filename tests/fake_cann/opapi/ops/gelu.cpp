// TEST-ONLY model of the gelu family's aclnn operators (csrc/ops/gelu/npu.cpp), part of the fake libopapi.so and of
// the stand-in's aclnn library (tests/npu_stub). As the CANN sources show them (ops-nn activation/gelu_grad_v2,
// gelu_v2; docs/npu.md; the section numbers are the third source audit's):
//   * aclnnGeluBackwardV2(gradOutput, self, char* approximate, gradInput): promotes gradOutput/self with aclnn's
//     PromoteType (no 0-dim rule) and rejects a promoted dtype other than gradInput's; bf16 only on
//     A2/A3/Ascend950 (161002 otherwise); inputs of more than 8 dimensions rejected (161002; aclnn documents 0-8);
//     gradInput written honouring its strides (ViewCopy); its kernel GeluGradV2 is looked up in phase 1 (561003
//     where it is missing, as a generated operator's);
//   * aclnnGeluV2(x, int64 approximate, y) (1.1, 1.5): approximate 1 = tanh, any other value "none"; fp16/bf16/fp32
//     (bf16 on A2/A3/Ascend950 only, 161002 elsewhere), x and y of one dtype and shape; 16-bit computed in fp32 and
//     rounded once; "none" is NOT erf: on A2/A3 the TBE polynomial x / (1 + exp(p(x1^2) x1)), x1 = min(x, 5.75),
//     Horner in fp32; on Ascend950 0.5 x (1 + erf(t)), t = x / sqrt 2 clipped to [-3.92, 3.92] (the Pade form's
//     clip; its rational approximation itself is not modelled: std::erf); tanh: x / (1 + exp(-1.5957691 (x +
//     0.044715 x^3))). x made contiguous, y written through its strides (ViewCopy); empty x: y untouched.
// Declared: the kernel GeluGradV2 on every SoC; both APIs the extension's, their executors cached by nnopbase
// (composite op_api files: pta_cache.cpp)
// (what every family's model shares, and the OpFamily declaration below: fake_opapi.h, "The operator families'
// models").
#include "../fake_opapi.h"

namespace fake {
namespace {

const OpFamily kGelu("gelu", {{"GeluGradV2", kSocAll}},
                     {{"aclnnGeluBackwardV2", kCached}, {"aclnnGeluV2", kCached}});

struct GeluGradExec : Executor {
  const aclTensor *g, *x, *out;
  bool tanh_mode;
  int run(void*) override {
    const double kAlpha = 0.70710678118654752440;  // 1/sqrt(2)
    const double kBeta = 0.39894228040143267794;   // 1/sqrt(2*pi)
    const double kKappa = 0.79788456080286535588;  // sqrt(2/pi)
    const float c = 0.044715f;
    for_each_index(out->sizes, [&](const std::vector<int64_t>& idx) {
      const float gv = load(g, bcast_offset(g, out->sizes, idx));
      const float xv = load(x, bcast_offset(x, out->sizes, idx));
      float d;
      if (tanh_mode) {
        const float u = static_cast<float>(kKappa) * (xv + c * xv * xv * xv);
        const float t = std::tanh(u);
        const float du = static_cast<float>(kKappa) * (1.0f + 3.0f * c * xv * xv);
        d = 0.5f * (1.0f + t) + 0.5f * xv * (1.0f - t * t) * du;
      } else {
        d = 0.5f + 0.5f * std::erf(xv * static_cast<float>(kAlpha)) +
            xv * std::exp(-0.5f * xv * xv) * static_cast<float>(kBeta);
      }
      store(out, bcast_offset(out, out->sizes, idx), gv * d);
    });
    return kSuccess;
  }
};

int32_t promote(int32_t a, int32_t b) { return a == b ? a : F32; }  // among fp16/bf16/fp32

struct GeluV2Exec : Executor {
  const aclTensor *x, *y;
  bool tanh_form;
  int run(void*) override {
    const int64_t n = numel(x);
    for (int64_t i = 0; i < n; ++i) {
      const float v = load(x, offset_of(x, i));
      float r;
      if (tanh_form) {
        r = v / (1.0f + std::exp(-1.5957691f * (v + 0.044715f * v * v * v)));
      } else if (soc_950()) {
        const float t = std::min(std::max(v * 0.70710678f, -3.92f), 3.92f);
        r = 0.5f * v * (1.0f + std::erf(t));
      } else {  // A2/A3 TBE gelu_v2 "none"
        const float x1 = std::min(v, 5.75f), u = x1 * x1;
        float p = -0.3512339572e-8f;
        for (float c : {0.2645266170e-6f, -0.7929488134e-5f, 0.1106123840e-3f, 0.6518995814e-4f, -0.7266616915e-1f,
                        -0.1595769883e1f}) {
          p = p * u + c;
        }
        r = v / (1.0f + std::exp(p * x1));
      }
      store(y, offset_of(y, i), r);
    }
    return kSuccess;
  }
};

}  // namespace

extern "C" {

// --- aclnnGeluBackwardV2 ------------------------------------------------------------------------------------
int aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, char* approximate,
                                        aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
  count("aclnnGeluBackwardV2GetWorkspaceSize");
  if (!gradOutput || !self || !approximate || !gradInput || !workspaceSize || !executor) return kNullptr;
  for (const aclTensor* t : {gradOutput, self, static_cast<const aclTensor*>(gradInput)}) {
    if (t->sizes.size() > static_cast<size_t>(kMaxDims))
      return reject(kInvalid, "GeluBackwardV2 supports 0-8 dimensions, but got " +
                                  std::to_string(t->sizes.size()) + ".");
  }
  if (!valid(gradOutput) || !valid(self) || !valid(gradInput)) return kInvalid;
  if (!is_float(gradOutput) || !is_float(self) || !is_float(gradInput)) return kInvalid;
  const std::string mode(approximate);
  if (mode != "none" && mode != "tanh") return kInvalid;
  std::vector<int64_t> shape;
  if (!broadcast(gradOutput->sizes, self->sizes, shape) || shape != gradInput->sizes) return kInvalid;
  const int32_t promoted = promote(gradOutput->dtype, self->dtype);
  if (promoted == BF16 && !soc_a2_a3_950())
    return reject(kInvalid, "Input dtype of gelu is not support bfloat16 in current socversion.");
  if (gradInput->dtype != promoted)
    return reject(kInvalid, "Promote dtype of GradOutput and Self is " + dtype_name(promoted) +
                                ", not matching with gradInput " + dtype_name(gradInput->dtype) + ".");
  if (!has_kernel("GeluGradV2")) return no_kernel("GeluGradV2");
  auto* e = new GeluGradExec;
  e->g = gradOutput; e->x = self; e->out = gradInput; e->tanh_mode = mode == "tanh";
  e->internal_copies = copies({gradOutput, self});
  return finish_phase1(e, workspaceSize, executor, {gradOutput, self, gradInput});
}

int aclnnGeluBackwardV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnGeluBackwardV2", workspace, workspaceSize, executor);
}

// --- aclnnGeluV2 ----------------------------------------------------------------------------------------------
int aclnnGeluV2GetWorkspaceSize(const aclTensor* x, int64_t approximate, aclTensor* y, uint64_t* workspaceSize,
                                aclOpExecutor** executor) {
  count("aclnnGeluV2GetWorkspaceSize");
  if (!x || !y || !workspaceSize || !executor) return kNullptr;
  if (!valid(x) || !valid(y) || !is_float(x) || x->dtype != y->dtype || x->sizes != y->sizes) return kInvalid;
  if (!soc_bf16_ok(x->dtype)) return reject(kInvalid, "GeluV2: bfloat16 is not supported on this SoC.");
  auto* e = new GeluV2Exec;
  e->x = x; e->y = y; e->tanh_form = approximate == 1;
  return finish_forward_phase1(e, workspaceSize, executor, {x}, y);
}
int aclnnGeluV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnGeluV2", workspace, workspaceSize, executor);
}

}  // extern "C"

}  // namespace fake
