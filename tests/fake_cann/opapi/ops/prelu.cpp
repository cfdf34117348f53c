// TEST-ONLY model of the prelu family's aclnn operators (csrc/ops/prelu/npu.cpp), part of the fake libopapi.so and
// of the stand-in's aclnn library (tests/npu_stub). As the CANN sources show them (ops-nn
// activation/p_relu_grad_update, prelu; docs/npu.md):
//   * aclnnPreluBackward(gradOutput, self, weight, gradInput, gradWeight): bf16 only on SocVersion
//     ASCEND910B..ASCEND910E, which includes ASCEND950 = ASCEND910_95 (opbase platform.h) (161002 otherwise); two
//     kernels per SoC family: on Ascend950 the AscendC PReluGradUpdate computes in the dtype (grad_input = x > 0 ?
//     g : w g; update = x > 0 ? 0 : x g, each rounded to the dtype); elsewhere the TBE kernel computes in fp32
//     (grad_input = (x > 0 ? 1 + 0 w : 0 + 1 w) g, rounded to the dtype as dx; update = (x > 0 ? 0 x : 1 x) g + 0
//     dx, rounded to the dtype), so an infinite or NaN grad_input, or x = +inf, makes its update NaN.
//     PReluGradReduce then sums the updates in fp32 and rounds once. A 0-dim self (which aclnn does not reshape,
//     unlike a 1-D one) fails phase 1 with 561002 (ACLNN_ERR_INNER_TILING_ERROR: the kernels index its dimension 1;
//     inferred, not confirmed on hardware). Outputs written honouring their strides (ViewCopy); PReluGradUpdate is
//     looked up in phase 1 (561003 where it is missing);
//   * aclnnPrelu(self, weight, out) (2): fp16/fp32, bf16 on A2/A3/Ascend950; weight of 1 or C elements, any shape;
//     x > 0 ? x : x * w, the product rounded to the dtype; out through its strides; a 0-dim self reaches the
//     kernels unreshaped (modelled as the tiling failure 561002, as PreluBackward's); empty: out untouched.
// Declared: the kernel PReluGradUpdate on every SoC; both APIs the extension's, their executors cached by nnopbase
// (composite op_api files: pta_cache.cpp)
// (what every family's model shares, and the OpFamily declaration below: fake_opapi.h, "The operator families'
// models").
#include "../fake_opapi.h"

namespace fake {
namespace {

const OpFamily kPrelu("prelu", {{"PReluGradUpdate", kSocAll}},
                      {{"aclnnPreluBackward", kCached}, {"aclnnPrelu", kCached}});

// prelu_backward ---------------------------------------------------------------------------------------------
struct PreluGradExec : Executor {
  const aclTensor *g, *x, *w, *gi, *gw;
  int64_t channels;  // weight elements (1 or C)
  bool ascendc;      // Ascend950's AscendC kernels, else the TBE kernel (A2/A3 and older SoCs)
  int run(void* workspace) override {
    if (numel(x) == 0) return kSuccess;  // like aclnn: gradWeight left untouched
    float* acc = static_cast<float*>(workspace);
    for (int64_t c = 0; c < channels; ++c) acc[c] = 0.0f;
    std::vector<int64_t> wshape = w->sizes;
    const int32_t T = x->dtype;
    for_each_index(x->sizes, [&](const std::vector<int64_t>& idx) {
      const int64_t c = channels == 1 ? 0 : idx[1];
      // weight element c in weight's own row-major order
      int64_t woff = 0, rem = c;
      for (int d = static_cast<int>(wshape.size()) - 1; d >= 0; --d) {
        woff += (rem % wshape[d]) * w->strides[d];
        rem /= wshape[d];
      }
      const float gv = load(g, bcast_offset(g, x->sizes, idx));
      const float xv = load(x, bcast_offset(x, x->sizes, idx));
      const float wv = load(w, woff);
      const bool pos = xv > 0.0f;
      float dx, update;
      if (ascendc) {  // PReluGradDxCustom / PReluGradDaCustom: Mul, Compare GT, Select, all in the dtype
        dx = pos ? gv : round_to(T, wv * gv);
        update = pos ? 0.0f : round_to(T, xv * gv);
      } else {  // TBE prelu_grad_update (vcmp/vsel): fp32, dx rounded to the dtype, update += dx * 0
        const float one_zero = pos ? 1.0f : 0.0f, zero_one = pos ? 0.0f : 1.0f;
        dx = round_to(T, (one_zero + zero_one * wv) * gv);
        update = round_to(T, (zero_one * xv) * gv + dx * 0.0f);
      }
      store(gi, bcast_offset(gi, x->sizes, idx), dx);
      acc[c] += update;  // PReluGradReduce: the updates summed in fp32
    });
    for (int64_t c = 0; c < channels; ++c) {
      int64_t off = 0, rem = c;
      for (int d = static_cast<int>(gw->sizes.size()) - 1; d >= 0; --d) {
        off += (rem % gw->sizes[d]) * gw->strides[d];
        rem /= gw->sizes[d];
      }
      store(gw, off, acc[c]);
    }
    return kSuccess;
  }
};

// prelu -------------------------------------------------------------------------------------------------------
struct PreluExec : Executor {
  const aclTensor *x, *w, *out;
  int run(void*) override {
    const int64_t n = numel(x), nw = numel(w);
    const int64_t C = x->sizes.size() > 1 ? x->sizes[1] : 1;
    int64_t inner = 1;
    for (size_t d = 2; d < x->sizes.size(); ++d) inner *= x->sizes[d];
    for (int64_t i = 0; i < n; ++i) {
      const float v = load(x, offset_of(x, i));
      const int64_t c = nw == 1 ? 0 : (i / inner) % C;
      const float r = v > 0.0f ? v : round_to(x->dtype, v * load(w, offset_of(w, c)));
      store(out, offset_of(out, i), r);
    }
    return kSuccess;
  }
};

}  // namespace

extern "C" {

// --- aclnnPreluBackward -------------------------------------------------------------------------------------
int aclnnPreluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self, const aclTensor* weight,
                                       aclTensor* gradInput, aclTensor* gradWeight, uint64_t* workspaceSize,
                                       aclOpExecutor** executor) {
  count("aclnnPreluBackwardGetWorkspaceSize");
  if (!gradOutput || !self || !weight || !gradInput || !gradWeight || !workspaceSize || !executor) return kNullptr;
  for (const aclTensor* t : {gradOutput, self, weight, static_cast<const aclTensor*>(gradInput), static_cast<const aclTensor*>(gradWeight)}) {
    if (!valid(t) || t->dtype != self->dtype || !is_float(t)) return kInvalid;
  }
  std::vector<int64_t> shape;
  if (!broadcast(gradOutput->sizes, self->sizes, shape) || shape != self->sizes) return kInvalid;
  if (!same_shape(gradInput, self)) return kInvalid;
  if (self->dtype == BF16 && !soc_a2_a3_950())  // SocVersion ASCEND910B..ASCEND910E, ASCEND950 included
    return reject(kInvalid, "self dtype BFLOAT16 not in the dtype support list of this SoC (FLOAT, FLOAT16).");
  const int64_t C = self->sizes.size() > 1 ? self->sizes[1] : 1;
  const int64_t nw = numel(weight);
  if (nw != 1 && nw != C) return kInvalid;
  // gradWeight: weight's shape when weight has one element, else 1-D with weight's element count.
  if (nw == 1 ? gradWeight->sizes != weight->sizes : (gradWeight->sizes.size() != 1 || gradWeight->sizes[0] != nw))
    return kInvalid;
  if (self->sizes.empty())  // only a 1-D self is reshaped to (1, N); the kernels index dimension 1
    return reject(kTilingError, "PReluGradUpdate tiling: self has no dimension 1.");
  if (!has_kernel("PReluGradUpdate")) return no_kernel("PReluGradUpdate");
  auto* e = new PreluGradExec;
  e->g = gradOutput; e->x = self; e->w = weight; e->gi = gradInput; e->gw = gradWeight; e->channels = nw;
  e->ascendc = soc_950();
  e->internal_copies = copies({gradOutput, self, weight});
  e->workspace_size = static_cast<uint64_t>(nw) * sizeof(float);
  return finish_phase1(e, workspaceSize, executor, {gradOutput, self, weight, gradInput, gradWeight});
}

int aclnnPreluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnPreluBackward", workspace, workspaceSize, executor);
}

// --- aclnnPrelu ----------------------------------------------------------------------------------------------
int aclnnPreluGetWorkspaceSize(const aclTensor* self, const aclTensor* weight, aclTensor* out, uint64_t* workspaceSize,
                               aclOpExecutor** executor) {
  count("aclnnPreluGetWorkspaceSize");
  if (!self || !weight || !out || !workspaceSize || !executor) return kNullptr;
  for (const aclTensor* t : {self, weight, static_cast<const aclTensor*>(out)}) {
    if (!valid(t) || !is_float(t)) return kInvalid;
  }
  if (weight->dtype != self->dtype || out->dtype != self->dtype || out->sizes != self->sizes) return kInvalid;
  if (!soc_bf16_ok(self->dtype)) return reject(kInvalid, "Prelu: bfloat16 is not supported on this SoC.");
  const int64_t C = self->sizes.size() > 1 ? self->sizes[1] : 1;
  if (numel(weight) != 1 && numel(weight) != C) return kInvalid;
  if (self->sizes.empty()) return reject(kTilingError, "PRelu tiling: self has no dimension 1.");
  auto* e = new PreluExec;
  e->x = self; e->w = weight; e->out = out;
  return finish_forward_phase1(e, workspaceSize, executor, {self, weight}, out);
}
int aclnnPrelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnPrelu", workspace, workspaceSize, executor);
}

}  // extern "C"

}  // namespace fake
