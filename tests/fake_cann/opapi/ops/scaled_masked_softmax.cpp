// TEST-ONLY model of the scaled_masked_softmax family's aclnn operators (csrc/ops/scaled_masked_softmax/npu.cpp),
// part of the fake libopapi.so and of the stand-in's aclnn library (tests/npu_stub). As the CANN sources show them
// (ops-nn vfusion/scaled_masked_softmax_v2, scaled_masked_softmax_grad_v2; docs/npu.md):
//   * aclnnScaledMaskedSoftmaxBackward(gradOutput, y, mask, double scale, bool fixTriuMask, out): writes `out`
//     DENSELY from its storage offset, ignoring its strides: a transposed out gets wrong values, a sliced one is
//     written past its view (phase 2 fails with 561103 instead when that would run past the storage, to keep the
//     host process intact); FRACTAL_NZ rejected by its CheckFormat on SoCs other than Ascend950, any private
//     format by the inner generated ScaledMaskedSoftmaxGradV2 (opdef_formats); its kernel looked up in phase 1
//     (561003 where it is missing);
//   * aclnnScaledMaskedSoftmax(x, mask, double scale, bool fixTriuMask, y) (4.1): x and y of one dtype (fp16, bf16,
//     fp32), mask BOOL, all 4-D, mask dims 0/1 equal to x's or 1 and dims 2/3 equal, 0 < S2 <= 4096 (8192 on
//     Ascend950): 161002 otherwise; a null mask 561103; fixTriuMask=true 161002. fp16: scale rounded to fp16 and
//     x * scale computed and rounded in fp16, the mask select (-10000) in fp16, then fp32; bf16: cast to fp32, times
//     float(scale); fp32: times float(scale). Masked positions -10000 (a select: NaN or inf there is replaced),
//     softmax in fp32, rounded once, y written DENSELY.
// Declared: the kernels ScaledMaskedSoftmaxV2 on A2/A3/Ascend950 and ScaledMaskedSoftmaxGradV2 there and on
// Ascend310P; both APIs the extension's, their executors NOT cached by nnopbase (they hand over to generated inner
// operators without CREATE_EXECUTOR(): pta_cache.cpp)
// (what every family's model shares, and the OpFamily declaration below: fake_opapi.h, "The operator families'
// models").
#include "../fake_opapi.h"

namespace fake {
namespace {

const OpFamily kScaledMaskedSoftmax(
    "scaled_masked_softmax",
    {{"ScaledMaskedSoftmaxV2", kSocA2A3_950}, {"ScaledMaskedSoftmaxGradV2", kSocA2A3_950 | kSoc310P}},
    {{"aclnnScaledMaskedSoftmaxBackward", kNotCached}, {"aclnnScaledMaskedSoftmax", kNotCached}});

// scaled_masked_softmax_backward ----------------------------------------------------------------------------
struct SoftmaxGradExec : Executor {
  const aclTensor *g, *y, *mask, *out;
  float scale;
  int run(void*) override {
    if (!dense_fits(out)) return kInternal;  // the device would write past the allocation
    const int64_t B = g->sizes[0], N = g->sizes[1], S1 = g->sizes[2], S2 = g->sizes[3];
    auto off4 = [](const aclTensor* t, int64_t b, int64_t n, int64_t i, int64_t k) {
      return (t->sizes[0] == 1 ? 0 : b * t->strides[0]) + (t->sizes[1] == 1 ? 0 : n * t->strides[1]) +
             i * t->strides[2] + k * t->strides[3];
    };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < S1; ++i) {
          float s = 0.0f;
          for (int64_t k = 0; k < S2; ++k) s += load(g, off4(g, b, n, i, k)) * load(y, off4(y, b, n, i, k));
          for (int64_t k = 0; k < S2; ++k) {
            const float v = load_bool(mask, off4(mask, b, n, i, k))
                                ? 0.0f
                                : scale * (load(g, off4(g, b, n, i, k)) - s) * load(y, off4(y, b, n, i, k));
            store(out, ((b * N + n) * S1 + i) * S2 + k, v);  // dense from the storage offset
          }
        }
    return kSuccess;
  }
};

// scaled_masked_softmax ---------------------------------------------------------------------------------------
struct SoftmaxExec : Executor {
  const aclTensor *x, *mask, *y;
  double scale;
  int run(void*) override {
    if (!dense_fits(y)) return kInternal;
    const int64_t B = x->sizes[0], N = x->sizes[1], S1 = x->sizes[2], S2 = x->sizes[3];
    std::vector<float> row(S2);
    const float scale32 = static_cast<float>(scale);
    const float scale16 = half_to_float(float_to_half(scale32));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < N; ++h)
        for (int64_t i = 0; i < S1; ++i) {
          float mx = -INFINITY;
          for (int64_t k = 0; k < S2; ++k) {
            const int64_t xo = b * x->strides[0] + h * x->strides[1] + i * x->strides[2] + k * x->strides[3];
            const int64_t mo = (mask->sizes[0] == 1 ? 0 : b * mask->strides[0]) +
                               (mask->sizes[1] == 1 ? 0 : h * mask->strides[1]) + i * mask->strides[2] +
                               k * mask->strides[3];
            const float v = load(x, xo);
            float z = x->dtype == F16 ? round_to(F16, v * scale16) : v * scale32;  // fp16: Muls in fp16
            if (load_bool(mask, mo)) z = -10000.0f;
            row[k] = z;
            mx = std::max(mx, z);
          }
          float sum = 0.0f;
          for (int64_t k = 0; k < S2; ++k) sum += (row[k] = std::exp(row[k] - mx));
          for (int64_t k = 0; k < S2; ++k) store(y, ((b * N + h) * S1 + i) * S2 + k, row[k] / sum);
        }
    return kSuccess;
  }
};

}  // namespace

extern "C" {

// --- aclnnScaledMaskedSoftmaxBackward -----------------------------------------------------------------------
int aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* y,
                                                     const aclTensor* mask, double scale, bool fixTriuMask,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
  count("aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize");
  if (!gradOutput || !y || !mask || !out || !workspaceSize || !executor) return kNullptr;
  if (fixTriuMask) return reject(kInvalid, "fixTriuMask only support false");
  for (const aclTensor* t : {gradOutput, y, mask, static_cast<const aclTensor*>(out)}) {
    if (!valid(t) || t->sizes.size() != 4) return kInvalid;
  }
  if (!is_float(gradOutput) || y->dtype != gradOutput->dtype || out->dtype != gradOutput->dtype) return kInvalid;
  if (!same_shape(y, gradOutput) || !same_shape(out, gradOutput) || gradOutput->sizes[3] > 4096) return kInvalid;
  if (mask->dtype != BOOL || mask->sizes[2] != gradOutput->sizes[2] || mask->sizes[3] != gradOutput->sizes[3])
    return kInvalid;
  for (int d = 0; d < 2; ++d) {
    if (mask->sizes[d] != 1 && mask->sizes[d] != gradOutput->sizes[d]) return kInvalid;
  }
  if (!soc_950()) {  // CheckFormat (aclnn_scaled_masked_softmax_backward.cpp; skipped on regbase SoCs)
    const auto nz = [](const aclTensor* t) { return t->format == kFormatFractalNz; };
    if (nz(gradOutput) || nz(y) || nz(out)) {
      return reject(kInvalid, "Input and output format only support [ND]. Actual: gradOutput:[" +
                                  format_name(gradOutput->format) + "], y:[" + format_name(y->format) + "], out:[" +
                                  format_name(out->format) + "].");
    }
    if (nz(mask)) {
      return reject(kInvalid, "Mask format only support [ND]. Actual: mask:[" + format_name(mask->format) + "].");
    }
  }
  if (const int s = opdef_formats({gradOutput, y, mask, out}); s != kSuccess) return s;  // the inner GradV2 op
  if (!has_kernel("ScaledMaskedSoftmaxGradV2")) return no_kernel("ScaledMaskedSoftmaxGradV2");
  auto* e = new SoftmaxGradExec;
  e->g = gradOutput; e->y = y; e->mask = mask; e->out = out; e->scale = static_cast<float>(scale);
  e->internal_copies = copies({gradOutput, y, mask});
  return finish_phase1(e, workspaceSize, executor, {gradOutput, y, mask, out});
}

int aclnnScaledMaskedSoftmaxBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnScaledMaskedSoftmaxBackward", workspace, workspaceSize, executor);
}

// --- aclnnScaledMaskedSoftmax ---------------------------------------------------------------------------------
int aclnnScaledMaskedSoftmaxGetWorkspaceSize(const aclTensor* x, const aclTensor* mask, double scale, bool fixTriuMask,
                                             aclTensor* y, uint64_t* workspaceSize, aclOpExecutor** executor) {
  count("aclnnScaledMaskedSoftmaxGetWorkspaceSize");
  if (!x || !y || !workspaceSize || !executor) return kNullptr;
  if (!mask) return reject(kInternalNullptr, "ScaledMaskedSoftmax: mask is null.");
  if (fixTriuMask) return reject(kInvalid, "fixTriuMask only support false");
  for (const aclTensor* t : {x, mask, static_cast<const aclTensor*>(y)}) {
    if (!valid(t) || t->sizes.size() != 4) return kInvalid;
  }
  if (!is_float(x) || y->dtype != x->dtype || y->sizes != x->sizes || mask->dtype != BOOL) return kInvalid;
  if (mask->sizes[2] != x->sizes[2] || mask->sizes[3] != x->sizes[3]) return kInvalid;
  for (int d = 0; d < 2; ++d) {
    if (mask->sizes[d] != 1 && mask->sizes[d] != x->sizes[d]) return kInvalid;
  }
  if (x->sizes[3] <= 0 || x->sizes[3] > (soc_950() ? 8192 : 4096)) return kInvalid;
  if (const int s = opdef_formats({x, mask, y}); s != kSuccess) return s;  // the inner ScaledMaskedSoftmaxV2 op
  if (!has_kernel("ScaledMaskedSoftmaxV2")) return no_kernel("ScaledMaskedSoftmaxV2");
  auto* e = new SoftmaxExec;
  e->x = x; e->mask = mask; e->y = y; e->scale = scale;
  return finish_forward_phase1(e, workspaceSize, executor, {x, mask}, y);
}
int aclnnScaledMaskedSoftmax(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnScaledMaskedSoftmax", workspace, workspaceSize, executor);
}

}  // extern "C"

}  // namespace fake
