// TEST-ONLY models of the aclnn operators the forward ops call on the NPU (csrc/ops/{gelu,prelu,logit,
// scaled_masked_softmax,grouped_bias_add}.cpp), part of the fake libopapi.so. Independent plain C++ through the
// descriptors, like backward.cpp, computing what the real kernels compute as the third source audit read them
// (CANN's ops-nn / ops-math sources; the section numbers below are the audit's, summed up in docs/npu.md):
//   * aclnnGeluV2(x, int64 approximate, y) (1.1, 1.5): approximate 1 = tanh, any other value "none"; fp16/bf16/fp32
//     (bf16 on A2/A3/Ascend950 only, 161002 elsewhere), x and y of one dtype and shape; 16-bit computed in fp32 and
//     rounded once; "none" is NOT erf: on A2/A3 the TBE polynomial x / (1 + exp(p(x1^2) x1)), x1 = min(x, 5.75),
//     Horner in fp32; on Ascend950 0.5 x (1 + erf(t)), t = x / sqrt 2 clipped to [-3.92, 3.92] (the Pade form's
//     clip; its rational approximation itself is not modelled: std::erf); tanh: x / (1 + exp(-1.5957691 (x +
//     0.044715 x^3))). x made contiguous, y written through its strides (ViewCopy); empty x: y untouched.
//   * aclnnPrelu(self, weight, out) (2): fp16/fp32, bf16 on A2/A3/Ascend950; weight of 1 or C elements, any shape;
//     x > 0 ? x : x * w, the product rounded to the dtype; out through its strides; a 0-dim self reaches the
//     kernels unreshaped (modelled as the tiling failure 561002, as PreluBackward's); empty: out untouched.
//   * aclnnLogit(input, double eps, out) (3): fp16/bf16/fp32, input and out of one dtype and shape; fp32 compute:
//     for eps >= 0 the input clamped to [eps, 1 - eps] by compare and select (a NaN x stays NaN), ln(x / (1 - x)),
//     rounded once; out written DENSELY (AutoContiguous: the generated operator ignores out's strides); a fixed 16 MiB
//     workspace per call (logit_tiling.cpp).
//   * aclnnScaledMaskedSoftmax(x, mask, double scale, bool fixTriuMask, y) (4.1): x and y of one dtype (fp16, bf16,
//     fp32), mask BOOL, all 4-D, mask dims 0/1 equal to x's or 1 and dims 2/3 equal, 0 < S2 <= 4096 (8192 on
//     Ascend950): 161002 otherwise; a null mask 561103; fixTriuMask=true 161002. fp16: scale rounded to fp16 and
//     x * scale computed and rounded in fp16, the mask select (-10000) in fp16, then fp32; bf16: cast to fp32, times
//     float(scale); fp32: times float(scale). Masked positions -10000 (a select: NaN or inf there is replaced),
//     softmax in fp32, rounded once, y written DENSELY.
//   * aclnnRepeatInterleaveWithDim(self, repeats, int64 dim, int64 outputSize, out): the plain definition (dim 0,
//     what the NPU path uses), out through its strides. (aclnnAddcmul, the other operator of grouped_bias_add with
//     probs, is aten.cpp's.)
// Kernel counting (fake_opapi_calls("kernels")): each launch is one kernel, plus one for every input the operator
// has to make contiguous first (aclnn's l0op::Contiguous: a transposed, sliced or expanded input is a copy kernel).
#include "fake_opapi.h"

namespace fake {
namespace {

// Element offset of row-major index `i` of t's view.
int64_t offset_of(const aclTensor* t, int64_t i) {
  int64_t off = 0;
  for (int d = static_cast<int>(t->sizes.size()) - 1; d >= 0; --d) {
    off += (i % t->sizes[d]) * t->strides[d];
    i /= t->sizes[d];
  }
  return off;
}

bool soc_bf16_ok(int32_t dtype) { return dtype != BF16 || soc_a2_a3_950(); }

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

struct LogitExec : Executor {
  const aclTensor *x, *out;
  double eps;
  int run(void*) override {
    if (!dense_fits(out)) return kInternal;  // the device would write past the allocation
    const int64_t n = numel(x);
    const float e = static_cast<float>(eps);
    const bool clamp = e >= 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      float v = load(x, offset_of(x, i));
      if (clamp && v == v) {  // NaN x restored to NaN (x == x mask)
        v = v >= e ? v : e;
        v = v <= 1.0f - e ? v : 1.0f - e;
      }
      store(out, i, std::log(v / (1.0f - v)));  // dense from the storage offset
    }
    return kSuccess;
  }
};

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

struct RepeatExec : Executor {
  const aclTensor *self, *repeats, *out;
  int run(void*) override {
    const int64_t G = self->sizes[0], inner = numel(self) / std::max<int64_t>(G, 1);
    int64_t r = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t times = load_int(repeats, repeats->sizes.empty() ? 0 : g * repeats->strides[0]);
      for (int64_t t = 0; t < times; ++t, ++r)
        for (int64_t k = 0; k < inner; ++k)
          store(out, offset_of(out, r * inner + k), load(self, offset_of(self, g * inner + k)));
    }
    return kSuccess;
  }
};

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

int aclnnGeluV2GetWorkspaceSize(const aclTensor* x, int64_t approximate, aclTensor* y, uint64_t* workspaceSize,
                                aclOpExecutor** executor) {
  count("aclnnGeluV2GetWorkspaceSize");
  if (!x || !y || !workspaceSize || !executor) return kNullptr;
  if (!valid(x) || !valid(y) || !is_float(x) || x->dtype != y->dtype || x->sizes != y->sizes) return kInvalid;
  if (!soc_bf16_ok(x->dtype)) return reject(kInvalid, "GeluV2: bfloat16 is not supported on this SoC.");
  auto* e = new GeluV2Exec;
  e->x = x; e->y = y; e->tanh_form = approximate == 1;
  e->internal_copies = copies({x});
  e->empty = numel(x) == 0;
  return finish_phase1(e, workspaceSize, executor, {x, y});
}
int aclnnGeluV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnGeluV2", workspace, workspaceSize, executor);
}

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
  e->internal_copies = copies({self, weight});
  e->empty = numel(self) == 0;
  return finish_phase1(e, workspaceSize, executor, {self, weight, out});
}
int aclnnPrelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnPrelu", workspace, workspaceSize, executor);
}

int aclnnLogitGetWorkspaceSize(const aclTensor* input, double eps, const aclTensor* out, uint64_t* workspaceSize,
                               aclOpExecutor** executor) {
  count("aclnnLogitGetWorkspaceSize");
  if (!input || !out || !workspaceSize || !executor) return kNullptr;
  if (!valid(input) || !valid(out) || !is_float(input) || out->dtype != input->dtype || out->sizes != input->sizes)
    return kInvalid;
  if (const int s = opdef_formats({input, out}); s != kSuccess) return s;
  if (!has_kernel("Logit")) return no_kernel("Logit");
  auto* e = new LogitExec;
  e->x = input; e->out = out; e->eps = eps;
  e->internal_copies = copies({input});
  e->workspace_size = uint64_t(16) << 20;  // logit_tiling.cpp: a fixed 16 MiB
  return finish_phase1(e, workspaceSize, executor, {input, out});
}
int aclnnLogit(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnLogit", workspace, workspaceSize, executor);
}

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
  e->internal_copies = copies({x, mask});
  e->empty = numel(x) == 0;
  return finish_phase1(e, workspaceSize, executor, {x, mask, y});
}
int aclnnScaledMaskedSoftmax(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnScaledMaskedSoftmax", workspace, workspaceSize, executor);
}

int aclnnRepeatInterleaveWithDimGetWorkspaceSize(const aclTensor* self, const aclTensor* repeats, int64_t dim,
                                                 int64_t outputSize, aclTensor* out, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  count("aclnnRepeatInterleaveWithDimGetWorkspaceSize");
  if (!self || !repeats || !out || !workspaceSize || !executor) return kNullptr;
  if (dim != 0 || self->sizes.empty() || out->sizes.empty() || out->sizes[0] != outputSize ||
      out->dtype != self->dtype || (repeats->dtype != I64 && repeats->dtype != I32)) {
    return kInvalid;  // (the model covers dim 0, what the NPU path uses)
  }
  auto* e = new RepeatExec;
  e->self = self; e->repeats = repeats; e->out = out;
  e->internal_copies = copies({self, repeats});
  return finish_phase1(e, workspaceSize, executor);
}
int aclnnRepeatInterleaveWithDim(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnRepeatInterleaveWithDim", workspace, workspaceSize, executor);
}

}  // extern "C"
