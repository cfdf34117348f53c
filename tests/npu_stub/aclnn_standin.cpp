// TEST-ONLY host-memory stand-in for the part of the aclnn runtime the NPU sources call (CANN's libopapi.so):
// aclCreateTensor / aclDestroyTensor and the two-phase entry points of every operator used in csrc/npu, with
// the published C signatures (see SPEC.md and /work/shared/seeds):
//   aclnnStatus aclnnXxxGetWorkspaceSize(<op args>, uint64_t* workspaceSize, aclOpExecutor** executor)
//   aclnnStatus aclnnXxx(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream)
//
// Status codes as the real operators: 0 success, 161001 (ACLNN_ERR_PARAM_NULLPTR) for a null required
// argument, 161002 (ACLNN_ERR_PARAM_INVALID) for an invalid one (dtype, rank, shape, descriptor, option),
// 561xxx (ACLNN_ERR_INNER*) for internal failures (opbase include/nnopbase/opdev/op_errno.h).
// Tensors are read and written ONLY through their aclTensor descriptors (view sizes, strides and offset in
// elements, dtype code, storage base pointer), so a wrong argument order, dtype code or stride shows up as a
// wrong result or a non-zero status.
//
// The math is an independent implementation written from SPEC.md (it does not call the package's kernels or
// PyTorch): fp16/bf16 are widened to fp32, computed in fp32 and rounded once (round-to-nearest-even);
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
//   * the SoC ($NPU_EXT_STANDIN_SOC, default Ascend910B3 = Atlas A2; A3 = Ascend910_93*; Ascend950 =
//     Ascend950PR_* / Ascend950DT_*, or Ascend910_95* as older toolchains name the same chips): bf16 only on
//     A2/A3/Ascend950 for GeluBackwardV2 and, for PreluBackward, on SocVersion ASCEND910B..ASCEND910E, which
//     includes ASCEND950 = ASCEND910_95 (opbase platform.h) (161002 otherwise);
//   * kernels per SoC: the kernels (L0 ops) GroupedBiasAddGrad, ScaledMaskedSoftmaxGradV2 and LogitGrad exist
//     on A2/A3/Ascend950 only (ScaledMaskedSoftmaxGradV2 also on Ascend310P), GeluGradV2 and PReluGradUpdate
//     everywhere; $NPU_EXT_STANDIN_NO_KERNEL (comma-separated kernel names) removes some for this SoC, as an
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
//
// Test hooks (not aclnn API): standin_calls(name) counts entry-point calls per name (both phases) and
// aclCreateTensor formats as "format <code> rank <n>"; standin_reset() clears the counts; standin_last_error()
// is the last rejection reason (what aclGetRecentErrMsg returns in the stand-in).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kNullptr = 161001;
constexpr int kInvalid = 161002;
constexpr int kInner = 561000;           // ACLNN_ERR_INNER: a kernel launch that failed
constexpr int kTilingError = 561002;     // ACLNN_ERR_INNER_TILING_ERROR
constexpr int kFindKernelError = 561003;  // ACLNN_ERR_INNER_FIND_KERNEL_ERROR
constexpr int kInternal = 561103;        // ACLNN_ERR_INNER_NULLPTR (the stand-in refusing an out-of-bounds access)

enum DType : int32_t { F32 = 0, F16 = 1, I32 = 3, I64 = 9, F64 = 11, BOOL = 12, BF16 = 27 };
constexpr int64_t kMaxDims = 8;

}  // namespace

struct aclOpExecutor;  // opaque; the stand-in's executors are the Executor objects below

struct aclTensor {
  std::vector<int64_t> sizes, strides;
  int32_t dtype;
  int64_t offset;
  int32_t format;
  int64_t storage_elems;
  void* data;
};

namespace {

std::mutex g_mu;
std::map<std::string, int> g_calls;

std::string g_last_error;

void count(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_calls[name];
}

// Records a rejection reason and returns the status (OP_LOGE + return in aclnn).
int reject(int status, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_last_error = why;
  return status;
}

std::string soc() {
  const char* env = std::getenv("NPU_EXT_STANDIN_SOC");
  return env != nullptr ? env : "Ascend910B3";
}

bool soc_is(const char* prefix) { return soc().rfind(prefix, 0) == 0; }
bool soc_950() { return soc_is("Ascend950") || soc_is("Ascend910_95"); }
bool soc_a2_a3() { return soc_is("Ascend910B") || soc_is("Ascend910_93"); }
bool soc_a2_a3_950() { return soc_a2_a3() || soc_950(); }

// Whether the installed op package has a kernel of this L0 op for the SoC (see the header comment).
bool has_kernel(const std::string& kernel) {
  const char* env = std::getenv("NPU_EXT_STANDIN_NO_KERNEL");
  if (env != nullptr) {
    std::string list = std::string(",") + env + ",";
    if (list.find("," + kernel + ",") != std::string::npos) return false;
  }
  if (kernel == "GroupedBiasAddGrad" || kernel == "LogitGrad") return soc_a2_a3_950();
  if (kernel == "ScaledMaskedSoftmaxGradV2") return soc_a2_a3_950() || soc_is("Ascend310P");
  return true;  // GeluGradV2, PReluGradUpdate
}

// Phase 1 of a generated operator whose kernel is missing for the SoC.
int no_kernel(const std::string& kernel) {
  return reject(kFindKernelError, "Cannot find binary for op " + kernel + " on " + soc() + ".");
}

int64_t itemsize(int32_t dt) {
  switch (dt) {
    case F32: case I32: return 4;
    case F16: case BF16: return 2;
    case I64: case F64: return 8;
    case BOOL: return 1;
    default: return 0;
  }
}

std::string dtype_name(int32_t dt) {
  switch (dt) {
    case F32: return "DT_FLOAT";
    case F16: return "DT_FLOAT16";
    case BF16: return "DT_BF16";
    default: return "DT_" + std::to_string(dt);
  }
}

bool is_float(const aclTensor* t) { return t->dtype == F32 || t->dtype == F16 || t->dtype == BF16; }

int64_t numel(const aclTensor* t) {
  int64_t n = 1;
  for (int64_t s : t->sizes) n *= s;
  return n;
}

// A descriptor is valid when its view lies inside its storage.
bool valid(const aclTensor* t) {
  if (itemsize(t->dtype) == 0 || t->sizes.size() > static_cast<size_t>(kMaxDims) || t->offset < 0) return false;
  int64_t last = t->offset;
  for (size_t d = 0; d < t->sizes.size(); ++d) {
    if (t->sizes[d] < 0 || t->strides[d] < 0) return false;
    if (t->sizes[d] == 0) return true;  // empty view: nothing is addressed
    last += (t->sizes[d] - 1) * t->strides[d];
  }
  return t->data != nullptr && last < t->storage_elems;
}

// --- fp16 / bf16 <-> fp32 (round to nearest even) -------------------------------------------------------
float bits_to_float(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
uint32_t float_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t b = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {  // subnormal half: multiple of 2^-24, nearbyint rounds to even
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  const uint32_t ab = float_to_bits(a);
  uint32_t exp = (ab >> 23) - 112, man = ab & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
  return sign | static_cast<uint16_t>(h);
}

float bf16_to_float(uint16_t v) { return bits_to_float(static_cast<uint32_t>(v) << 16); }

uint16_t float_to_bf16(float f) {
  if (std::isnan(f)) return static_cast<uint16_t>((float_to_bits(f) >> 16) | 0x40u);
  const uint32_t b = float_to_bits(f);
  const uint32_t rounded = b + 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

// --- element access through the descriptor ----------------------------------------------------------------
char* element(const aclTensor* t, int64_t elem) {
  return static_cast<char*>(t->data) + (t->offset + elem) * itemsize(t->dtype);
}

float load(const aclTensor* t, int64_t elem) {
  const char* p = element(t, elem);
  uint16_t u16;
  switch (t->dtype) {
    case F32: { float v; std::memcpy(&v, p, 4); return v; }
    case F16: std::memcpy(&u16, p, 2); return half_to_float(u16);
    case BF16: std::memcpy(&u16, p, 2); return bf16_to_float(u16);
    default: return NAN;
  }
}

void store(const aclTensor* t, int64_t elem, float v) {
  char* p = element(t, elem);
  uint16_t u16;
  switch (t->dtype) {
    case F32: std::memcpy(p, &v, 4); return;
    case F16: u16 = float_to_half(v); std::memcpy(p, &u16, 2); return;
    case BF16: u16 = float_to_bf16(v); std::memcpy(p, &u16, 2); return;
    default: return;
  }
}

// v rounded to the dtype (fp16 / bf16: round to nearest even) and widened back.
float round_to(int32_t dtype, float v) {
  switch (dtype) {
    case F16: return half_to_float(float_to_half(v));
    case BF16: return bf16_to_float(float_to_bf16(v));
    default: return v;
  }
}

bool load_bool(const aclTensor* t, int64_t elem) { return *element(t, elem) != 0; }

// A dense writer's extent: numel elements from the storage offset, whatever the strides.
bool dense_fits(const aclTensor* t) { return t->offset + numel(t) <= t->storage_elems; }

int64_t load_int(const aclTensor* t, int64_t elem) {
  const char* p = element(t, elem);
  if (t->dtype == I32) { int32_t v; std::memcpy(&v, p, 4); return v; }
  int64_t v; std::memcpy(&v, p, 8); return v;
}

// Element offset (relative to the view's offset) of logical index `idx` of the output shape `shape` in
// operand `t`, NumPy-broadcast (t's dims right-aligned, size-1 dims repeated).
int64_t bcast_offset(const aclTensor* t, const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t lead = shape.size() - t->sizes.size();
  for (size_t d = 0; d < t->sizes.size(); ++d) {
    if (t->sizes[d] != 1) off += idx[lead + d] * t->strides[d];
  }
  return off;
}

// Calls fn(idx) for every logical index of `shape`, row-major.
template <typename Fn>
void for_each_index(const std::vector<int64_t>& shape, Fn&& fn) {
  for (int64_t s : shape) if (s == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    fn(idx);
    int d = static_cast<int>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

bool broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>& out) {
  const size_t n = std::max(a.size(), b.size());
  out.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    const int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

// --- executors --------------------------------------------------------------------------------------------
struct Executor {
  virtual ~Executor() = default;
  virtual int run(void* workspace) = 0;
  uint64_t workspace_size = 0;
  bool kernel_missing = false;  // the launch fails (561000) and writes nothing
};

int finish_phase1(Executor* e, uint64_t* workspace_size, aclOpExecutor** executor) {
  *workspace_size = e->workspace_size;
  *executor = reinterpret_cast<aclOpExecutor*>(e);
  return kSuccess;
}

int phase2(const char* name, void* workspace, uint64_t workspace_size, aclOpExecutor* executor) {
  count(name);
  if (executor == nullptr) return kNullptr;
  auto* e = reinterpret_cast<Executor*>(executor);
  if (workspace_size != e->workspace_size) { delete e; return kInvalid; }
  if (workspace_size > 0 && workspace == nullptr) { delete e; return kNullptr; }
  if (e->kernel_missing) { delete e; return reject(kInner, std::string(name) + ": launch failed, no kernel binary."); }
  const int ret = e->run(workspace);
  delete e;
  return ret;
}

// gelu_backward_v2 ------------------------------------------------------------------------------------------
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

extern "C" {

// --- tensor descriptors -------------------------------------------------------------------------------------
aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, int32_t dataType, const int64_t* stride,
                           int64_t offset, int32_t format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
  count("aclCreateTensor");
  count("format " + std::to_string(format) + " rank " + std::to_string(viewDimsNum));
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
  t->storage_elems = 1;
  for (uint64_t i = 0; i < storageDimsNum; ++i) t->storage_elems *= storageDims[i];
  t->data = tensorData;
  return t;
}

int aclDestroyTensor(const aclTensor* tensor) {
  count("aclDestroyTensor");
  delete tensor;  // nullptr is fine, as in aclnn
  return kSuccess;
}

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
  return finish_phase1(e, workspaceSize, executor);
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
  e->workspace_size = static_cast<uint64_t>(nw) * sizeof(float);
  return finish_phase1(e, workspaceSize, executor);
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
  // hand-written L2: l0op::GroupedBiasAddGrad ignores the kernel lookup's status, so a missing kernel is only
  // found at the launch
  e->kernel_missing = !has_kernel("GroupedBiasAddGrad");
  e->workspace_size = static_cast<uint64_t>(gradY->sizes.back()) * sizeof(float);
  return finish_phase1(e, workspaceSize, executor);
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
  if (!has_kernel("ScaledMaskedSoftmaxGradV2")) return no_kernel("ScaledMaskedSoftmaxGradV2");
  auto* e = new SoftmaxExec;
  e->g = gradOutput; e->y = y; e->mask = mask; e->out = out; e->scale = static_cast<float>(scale);
  return finish_phase1(e, workspaceSize, executor);
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
  if (!has_kernel("LogitGrad")) return no_kernel("LogitGrad");
  auto* e = new LogitExec;
  e->x = x; e->dy = dy; e->out = out; e->eps = static_cast<float>(eps);
  return finish_phase1(e, workspaceSize, executor);
}

int aclnnLogitGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnLogitGrad", workspace, workspaceSize, executor);
}

// --- test hooks ---------------------------------------------------------------------------------------------
int standin_calls(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_calls.find(name);
  return it == g_calls.end() ? 0 : it->second;
}

void standin_reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls.clear();
}

const char* standin_last_error() {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(g_mu);
  copy = g_last_error;
  return copy.c_str();
}

}  // extern "C"
