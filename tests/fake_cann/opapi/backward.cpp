// TEST-ONLY models of the five backward aclnn operators csrc/ops/*/npu.cpp calls (part of the fake libopapi.so), with
// the published C signatures (docs/operators.md, "The aclnn calls"):
//   aclnnStatus aclnnXxxGetWorkspaceSize(<op args>, uint64_t* workspaceSize, aclOpExecutor** executor)
//   aclnnStatus aclnnXxx(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream)
//
// Tensors are read and written ONLY through their aclTensor descriptors (view sizes, strides and offset in
// elements, dtype code, storage base pointer), so a wrong argument order, dtype code or stride shows up as a
// wrong result or a non-zero status.
//
// The math is an independent implementation written from the operator contract (docs/operators.md; it does not
// call the package's kernels or PyTorch): fp16/bf16 are widened to fp32, computed in fp32 and rounded once (round-to-nearest-even);
// reductions accumulate in fp32, in a workspace requested from phase 1. Like aclnn, it leaves outputs of
// reductions over nothing untouched (the NPU path must zero-fill them).
//
// It models aclnn as the CANN sources show it behaves (ops-nn, opbase; see docs/npu.md), not as
// documented:
//   * inputs of any strides are read correctly (aclnn makes them contiguous);
//   * GeluBackwardV2, PreluBackward and GroupedBiasAddGrad(V2) write outputs honouring their strides (ViewCopy),
//     but ScaledMaskedSoftmaxBackward and LogitGrad write `out` DENSELY from its storage offset, ignoring its
//     strides: a transposed out gets wrong values, a sliced one is written past its view (phase 2 fails with
//     561103 instead when that would run past the storage, to keep the host process intact);
//   * GeluBackwardV2 promotes gradOutput/self with aclnn's PromoteType (no 0-dim rule) and rejects a promoted
//     dtype other than gradInput's;
//   * the SoC (fake_opapi.h): bf16 only on
//     A2/A3/Ascend950 for GeluBackwardV2 and, for PreluBackward, on SocVersion ASCEND910B..ASCEND910E, which
//     includes ASCEND950 = ASCEND910_95 (opbase platform.h) (161002 otherwise);
//   * kernels per SoC: the kernels (L0 ops) GroupedBiasAddGrad, ScaledMaskedSoftmaxGradV2 and LogitGrad exist
//     on A2/A3/Ascend950 only (ScaledMaskedSoftmaxGradV2 also on Ascend310P), GeluGradV2 and PReluGradUpdate
//     everywhere; $NPU_FAKE_NO_KERNEL (comma-separated kernel names) removes some for this SoC, as an
//     older CANN whose op package predates the SoC's config (e.g. the ascend950 configs of 2026-01..03). A
//     missing kernel fails as the real framework does: the generated operators (LogitGrad,
//     ScaledMaskedSoftmaxGradV2, and here also GeluGradV2 / PReluGradUpdate) in phase 1 with 561003
//     (ACLNN_ERR_INNER_FIND_KERNEL_ERROR); the hand-written GroupedBiasAddGrad passes phase 1 and its launch
//     (phase 2) returns 561000 (ACLNN_ERR_INNER) without writing the output;
//   * GroupedBiasAddGrad zero-fills empty groups (A2/A3 and Ascend950 kernels);
//   * LogitGrad keeps the quotient only where x >= lo and x <= hi and selects the fill (0 for eps >= 0, else NaN)
//     elsewhere, a NaN x included (ops-nn loss/logit_grad/op_kernel/logit_grad.h);
//   * PreluBackward as two kernels per SoC family: on Ascend950 the AscendC PReluGradUpdate computes in the dtype
//     (grad_input = x > 0 ? g : w g; update = x > 0 ? 0 : x g, each rounded to the dtype); elsewhere the TBE
//     kernel computes in fp32 (grad_input = (x > 0 ? 1 + 0 w : 0 + 1 w) g, rounded to the dtype as dx; update =
//     (x > 0 ? 0 x : 1 x) g + 0 dx, rounded to the dtype), so an infinite or NaN grad_input, or x = +inf, makes
//     its update NaN. PReluGradReduce then sums the updates in fp32 and rounds once. A 0-dim self (which aclnn
//     does not reshape, unlike a 1-D one) fails phase 1 with 561002 (ACLNN_ERR_INNER_TILING_ERROR: the kernels
//     index its dimension 1; inferred, not confirmed on hardware);
//   * GeluBackwardV2 rejects inputs of more than 8 dimensions (161002; aclnn documents 0-8);
//   * a rejected phase 1 leaves the executor null; phase 2 with a null executor returns 161001.
#include "fake_opapi.h"

namespace fake {
namespace {

struct GeluExec : Executor {
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

// prelu_backward ---------------------------------------------------------------------------------------------
struct PreluExec : Executor {
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

// grouped_bias_add_grad -------------------------------------------------------------------------------------
struct GroupedExec : Executor {
  const aclTensor *gy, *idx, *out;
  int64_t idx_type;
  int run(void* workspace) override {
    const int64_t G = out->sizes[0], H = out->sizes[1];
    float* acc = static_cast<float*>(workspace);
    int64_t start = 0;
    for (int64_t j = 0; j < G; ++j) {
      int64_t row0, rows;
      const aclTensor* base = gy;
      if (idx == nullptr) {
        row0 = 0;
        rows = gy->sizes[1];
      } else {
        const int64_t v = load_int(idx, j * idx->strides[0]);
        const int64_t end = idx_type == 0 ? v : start + v;
        // aclnn reads out of bounds here; the stand-in refuses instead (the NPU path must validate first).
        if (v < 0 || end < start || end > gy->sizes[0]) return kInternal;
        row0 = start;
        rows = end - start;
        start = end;
      }
      if (rows == 0) {  // like the A2 kernel: an empty group's row is zero-filled
        for (int64_t h = 0; h < H; ++h) store(out, j * out->strides[0] + h * out->strides[1], 0.0f);
        continue;
      }
      for (int64_t h = 0; h < H; ++h) acc[h] = 0.0f;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < H; ++h) {
          const int64_t off = idx == nullptr
                                  ? j * base->strides[0] + r * base->strides[1] + h * base->strides[2]
                                  : (row0 + r) * base->strides[0] + h * base->strides[1];
          acc[h] += load(gy, off);
        }
      }
      for (int64_t h = 0; h < H; ++h) store(out, j * out->strides[0] + h * out->strides[1], acc[h]);
    }
    return kSuccess;
  }
};

// scaled_masked_softmax_backward ----------------------------------------------------------------------------
struct SoftmaxExec : Executor {
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

// logit_grad ------------------------------------------------------------------------------------------------
struct LogitExec : Executor {
  const aclTensor *x, *dy, *out;
  float eps;
  int run(void*) override {
    if (!dense_fits(out)) return kInternal;  // the device would write past the allocation
    int64_t linear = 0;
    const bool clamp = eps >= 0.0f;  // NaN eps behaves like a negative one
    const float lo = clamp ? eps : 0.0f, hi = clamp ? 1.0f - eps : 1.0f;
    for_each_index(x->sizes, [&](const std::vector<int64_t>& idx) {
      const float xv = load(x, bcast_offset(x, x->sizes, idx));
      const float dv = load(dy, bcast_offset(dy, x->sizes, idx));
      // CompareScalar GE / LE, And, Select: a NaN x fails both comparisons and gets the fill
      const float select_value = clamp ? 0.0f : NAN;
      const float r = (xv >= lo && xv <= hi) ? dv / (xv * (1.0f - xv)) : select_value;
      store(out, linear++, r);  // dense from the storage offset (the generated op ignores out's strides)
    });
    return kSuccess;
  }
};

bool same_shape(const aclTensor* a, const aclTensor* b) { return a->sizes == b->sizes; }


}  // namespace
}  // namespace fake

using namespace fake;

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
  auto* e = new GeluExec;
  e->g = gradOutput; e->x = self; e->out = gradInput; e->tanh_mode = mode == "tanh";
  e->internal_copies = copies({gradOutput, self});
  return finish_phase1(e, workspaceSize, executor, {gradOutput, self, gradInput});
}

int aclnnGeluBackwardV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnGeluBackwardV2", workspace, workspaceSize, executor);
}

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
  auto* e = new PreluExec;
  e->g = gradOutput; e->x = self; e->w = weight; e->gi = gradInput; e->gw = gradWeight; e->channels = nw;
  e->ascendc = soc_950();
  e->internal_copies = copies({gradOutput, self, weight});
  e->workspace_size = static_cast<uint64_t>(nw) * sizeof(float);
  return finish_phase1(e, workspaceSize, executor, {gradOutput, self, weight, gradInput, gradWeight});
}

int aclnnPreluBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnPreluBackward", workspace, workspaceSize, executor);
}

// --- aclnnGroupedBiasAddGrad / V2 ---------------------------------------------------------------------------
namespace {
int grouped_phase1(const aclTensor* gradY, const aclTensor* groupIdx, int64_t groupIdxType, aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  if (!gradY || !out || !workspaceSize || !executor) return kNullptr;
  if (!valid(gradY) || !valid(out) || !is_float(gradY) || out->dtype != gradY->dtype) return kInvalid;
  if (groupIdxType != 0 && groupIdxType != 1) return kInvalid;
  int64_t G;
  if (groupIdx != nullptr) {
    if (!valid(groupIdx) || (groupIdx->dtype != I32 && groupIdx->dtype != I64)) return kInvalid;
    if (groupIdx->sizes.size() != 1 || groupIdx->sizes[0] > 2048 || gradY->sizes.size() != 2) return kInvalid;
    G = groupIdx->sizes[0];
  } else {
    if (gradY->sizes.size() != 3) return kInvalid;
    G = gradY->sizes[0];
  }
  if (out->sizes != std::vector<int64_t>{G, gradY->sizes.back()}) return kInvalid;
  auto* e = new GroupedExec;
  e->gy = gradY; e->idx = groupIdx; e->out = out; e->idx_type = groupIdxType;
  e->internal_copies = copies({gradY, groupIdx});
  // hand-written L2: l0op::GroupedBiasAddGrad ignores the kernel lookup's status, so a missing kernel is only
  // found at the launch
  e->kernel_missing = !has_kernel("GroupedBiasAddGrad");
  e->workspace_size = static_cast<uint64_t>(gradY->sizes.back()) * sizeof(float);
  return finish_phase1(e, workspaceSize, executor, {gradY, groupIdx, out});
}
}  // namespace

int aclnnGroupedBiasAddGradGetWorkspaceSize(const aclTensor* gradY, const aclTensor* groupIdxOptional, aclTensor* out,
                                            uint64_t* workspaceSize, aclOpExecutor** executor) {
  count("aclnnGroupedBiasAddGradGetWorkspaceSize");
  return grouped_phase1(gradY, groupIdxOptional, 0, out, workspaceSize, executor);
}

int aclnnGroupedBiasAddGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnGroupedBiasAddGrad", workspace, workspaceSize, executor);
}

int aclnnGroupedBiasAddGradV2GetWorkspaceSize(const aclTensor* gradY, const aclTensor* groupIdxOptional,
                                              int64_t groupIdxType, aclTensor* out, uint64_t* workspaceSize,
                                              aclOpExecutor** executor) {
  count("aclnnGroupedBiasAddGradV2GetWorkspaceSize");
  return grouped_phase1(gradY, groupIdxOptional, groupIdxType, out, workspaceSize, executor);
}

int aclnnGroupedBiasAddGradV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnGroupedBiasAddGradV2", workspace, workspaceSize, executor);
}

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
  auto* e = new SoftmaxExec;
  e->g = gradOutput; e->y = y; e->mask = mask; e->out = out; e->scale = static_cast<float>(scale);
  e->internal_copies = copies({gradOutput, y, mask});
  return finish_phase1(e, workspaceSize, executor, {gradOutput, y, mask, out});
}

int aclnnScaledMaskedSoftmaxBackward(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnScaledMaskedSoftmaxBackward", workspace, workspaceSize, executor);
}

// --- aclnnLogitGrad -----------------------------------------------------------------------------------------
int aclnnLogitGradGetWorkspaceSize(const aclTensor* x, const aclTensor* dy, double eps, const aclTensor* out,
                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  count("aclnnLogitGradGetWorkspaceSize");
  if (!x || !dy || !out || !workspaceSize || !executor) return kNullptr;
  if (!valid(x) || !valid(dy) || !valid(out) || !is_float(x)) return kInvalid;
  if (dy->dtype != x->dtype || out->dtype != x->dtype || !same_shape(dy, x) || !same_shape(out, x)) return kInvalid;
  if (const int s = opdef_formats({x, dy, out}); s != kSuccess) return s;
  if (!has_kernel("LogitGrad")) return no_kernel("LogitGrad");
  auto* e = new LogitExec;
  e->x = x; e->dy = dy; e->out = out; e->eps = static_cast<float>(eps);
  e->internal_copies = copies({x, dy});
  return finish_phase1(e, workspaceSize, executor, {x, dy, out});
}

int aclnnLogitGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnLogitGrad", workspace, workspaceSize, executor);
}


}  // extern "C"
