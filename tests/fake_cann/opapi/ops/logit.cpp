// TEST-ONLY model of the logit family's aclnn operators (csrc/ops/logit/npu.cpp), part of the fake libopapi.so and
// of the stand-in's aclnn library (tests/npu_stub). Both are generated operators (ops-nn loss/logit_grad/ and
// logit: op_host and op_kernel, no op_api; docs/npu.md): any private format rejected in phase 1 (opdef_formats),
// a missing kernel too (561003):
//   * aclnnLogitGrad(x, dy, double eps, out): keeps the quotient only where x >= lo and x <= hi and selects the
//     fill (0 for eps >= 0, else NaN) elsewhere, a NaN x included (ops-nn loss/logit_grad/op_kernel/logit_grad.h);
//     writes `out` DENSELY from its storage offset, ignoring its strides (phase 2 fails with 561103 instead when
//     that would run past the storage, to keep the host process intact);
//   * aclnnLogit(input, double eps, out) (3): fp16/bf16/fp32, input and out of one dtype and shape; fp32 compute:
//     for eps >= 0 the input clamped to [eps, 1 - eps] by compare and select (a NaN x stays NaN), ln(x / (1 - x)),
//     rounded once; out written DENSELY (AutoContiguous: the generated operator ignores out's strides); a fixed 16 MiB
//     workspace per call (logit_tiling.cpp).
// Declared: the kernels Logit and LogitGrad on A2/A3/Ascend950 only; both APIs the extension's, their executors
// NOT cached by nnopbase (generated operators run through NnopbaseExecutor: pta_cache.cpp)
// (what every family's model shares, and the OpFamily declaration below: fake_opapi.h, "The operator families'
// models").
#include "../fake_opapi.h"

namespace fake {
namespace {

const OpFamily kLogit("logit", {{"LogitGrad", kSocA2A3_950}, {"Logit", kSocA2A3_950}},
                      {{"aclnnLogitGrad", kNotCached}, {"aclnnLogit", kNotCached}});

// logit_grad ------------------------------------------------------------------------------------------------
struct LogitGradExec : Executor {
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

// logit -------------------------------------------------------------------------------------------------------
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

}  // namespace

extern "C" {

// --- aclnnLogitGrad -----------------------------------------------------------------------------------------
int aclnnLogitGradGetWorkspaceSize(const aclTensor* x, const aclTensor* dy, double eps, const aclTensor* out,
                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  count("aclnnLogitGradGetWorkspaceSize");
  if (!x || !dy || !out || !workspaceSize || !executor) return kNullptr;
  if (!valid(x) || !valid(dy) || !valid(out) || !is_float(x)) return kInvalid;
  if (dy->dtype != x->dtype || out->dtype != x->dtype || !same_shape(dy, x) || !same_shape(out, x)) return kInvalid;
  if (const int s = opdef_formats({x, dy, out}); s != kSuccess) return s;
  if (!has_kernel("LogitGrad")) return no_kernel("LogitGrad");
  auto* e = new LogitGradExec;
  e->x = x; e->dy = dy; e->out = out; e->eps = static_cast<float>(eps);
  e->internal_copies = copies({x, dy});
  return finish_phase1(e, workspaceSize, executor, {x, dy, out});
}

int aclnnLogitGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnLogitGrad", workspace, workspaceSize, executor);
}

// --- aclnnLogit ----------------------------------------------------------------------------------------------
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

}  // extern "C"

}  // namespace fake
