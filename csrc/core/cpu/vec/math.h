// The fp32 math of the kernels: fused-operation helpers generic over the lane type (at::vec's Vectorized and
// SSE2's four lanes), lane_op, fast_exp2, normal_tail (gelu's cdf tail), sign selects and reciprocals.
// Part of the kernels' vector helpers (core/cpu/vec.h): compiled once per ISA variant, everything in
// npu_ext::cpu::CPU_CAPABILITY.
#pragma once

#include "core/cpu/vec/lanes.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {

// The at::vec operations of normal_tail and the gelu erf kernels, generic over the lane type: at::vec's
// Vectorized<float> everywhere, and on x86-64's DEFAULT variant Sse2F, four fp32 lanes in one SSE2 register.
// at::vec's generic Vectorized<float> keeps its 8 lanes in memory between operations (28 instructions per
// element for gelu_backward_v2); those kernels run on two Sse2F halves instead, with the same operations in
// the same order (a * b + c as two roundings, as at::vec's generic fmadd), so the results are the same bits.
template <typename V>
C10_ALWAYS_INLINE V vfmadd(const V& a, const V& b, const V& c) {
  return at::vec::fmadd(a, b, c);
}
template <typename V>
C10_ALWAYS_INLINE V vfmsub(const V& a, const V& b, const V& c) {
  return at::vec::fmsub(a, b, c);
}
template <typename V>
C10_ALWAYS_INLINE V vfnmadd(const V& a, const V& b, const V& c) {
  return compat::fnmadd(a, b, c);
}
template <typename V>
C10_ALWAYS_INLINE V vclamp_max(const V& a, const V& max) {
  return at::vec::clamp_max(a, max);
}
template <typename V>
C10_ALWAYS_INLINE V vabs(const V& a) {
  return a.abs();
}

// kSse2Lanes<V>: V is Sse2F (below), lanes without FMA. A multiply-add there is a multiply, then an add: two
// latencies per step of a Horner chain, and the gelu erf kernels' chains (normal_tail's exp2 and erfcx
// polynomials, 13 steps between them) bound their SSE2 loops by latency, not by issue. Those polynomials are
// evaluated there in Estrin's form instead (pairs c_i + c_(i+1) x, combined with x^2 and x^4): about half the
// chain for two or three more multiplies. fp32 gelu_backward_v2 erf, 4M elements, 1 thread, AMD EPYC Zen 5:
// 5.8 -> 4.9 ms; the forward 6.2 -> 5.4 ms. The rounding differs from Horner's form by little: over a dense
// scan of [-14, 8) the mean error moved by at most 0.1 ulp (docs/accuracy.md). Lanes with FMA (AVX2, AVX-512,
// NEON) keep Horner's form, whose chains are half as long there.
template <typename V>
inline constexpr bool kSse2Lanes = false;
#if defined(NPU_EXT_SSE2_LANES)
struct Sse2F;
template <>
inline constexpr bool kSse2Lanes<Sse2F> = true;
struct Sse2F {
  __m128 v;
  Sse2F() = default;
  Sse2F(__m128 x) : v(x) {}  // NOLINT: implicit, as at::vec's Vectorized from its register type
  explicit Sse2F(float f) : v(_mm_set1_ps(f)) {}
  operator __m128() const { return v; }  // NOLINT
};
C10_ALWAYS_INLINE Sse2F operator+(Sse2F a, Sse2F b) { return _mm_add_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator-(Sse2F a, Sse2F b) { return _mm_sub_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator*(Sse2F a, Sse2F b) { return _mm_mul_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator/(Sse2F a, Sse2F b) { return _mm_div_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator&(Sse2F a, Sse2F b) { return _mm_and_ps(a, b); }
C10_ALWAYS_INLINE Sse2F operator^(Sse2F a, Sse2F b) { return _mm_xor_ps(a, b); }
C10_ALWAYS_INLINE Sse2F vfmadd(Sse2F a, Sse2F b, Sse2F c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
C10_ALWAYS_INLINE Sse2F vfmsub(Sse2F a, Sse2F b, Sse2F c) { return _mm_sub_ps(_mm_mul_ps(a, b), c); }
C10_ALWAYS_INLINE Sse2F vfnmadd(Sse2F a, Sse2F b, Sse2F c) { return _mm_sub_ps(c, _mm_mul_ps(a, b)); }
// a > max ? max : a, as at::vec's generic clamp_max (a NaN a stays: minps returns its second operand then)
C10_ALWAYS_INLINE Sse2F vclamp_max(Sse2F a, Sse2F max) { return _mm_min_ps(max, a); }
C10_ALWAYS_INLINE Sse2F vabs(Sse2F a) { return _mm_andnot_ps(_mm_set1_ps(-0.0f), a); }

// f(halves) on the two SSE2 halves of a generic Vectorized<float>, as one Vectorized<float>.
template <typename F>
C10_ALWAYS_INLINE Vectorized<float> on_sse2_halves(const Vectorized<float>& a, const F& f) {
  const Sse2Halves h = sse2_halves(a);
  return from_sse2(f(Sse2F(h.lo)), f(Sse2F(h.hi)));
}
template <typename F>
C10_ALWAYS_INLINE Vectorized<float> on_sse2_halves(const Vectorized<float>& a, const Vectorized<float>& b,
                                                   const F& f) {
  const Sse2Halves ha = sse2_halves(a), hb = sse2_halves(b);
  return from_sse2(f(Sse2F(ha.lo), Sse2F(hb.lo)), f(Sse2F(ha.hi), Sse2F(hb.hi)));
}
#endif

// lane_op(f): an fp32 op f written once for any lane type (f(x) or f(g, x) with at::vec's operators and the
// v* functions above), as an op for unary_vec_kernel / binary_vec_kernel. On x86-64's DEFAULT variant it is a
// LaneOp: it takes the generic Vectorized<float> (run on its two SSE2 halves) and Sse2F itself, which those
// loops then use on contiguous fp32 runs, four lanes straight from memory to memory. at::vec's generic
// Vectorized keeps its lanes in memory, and gcc does not remove the copies between it and the SSE2 halves:
// the fp32 gelu_backward_v2 erf loop ran 24.5 instructions per element that way, 13 of them arithmetic.
// Both paths run the same operations on each lane, so a tail or a strided run (through the Vectorized
// overloads) gives the same bits as a contiguous one. The loops take two registers per step (two independent
// chains in flight: 6.1 -> 5.8 ms for that loop). Elsewhere lane_op(f) is f.
#if defined(NPU_EXT_SSE2_LANES)
template <typename F>
struct LaneOp {
  F f;
  C10_ALWAYS_INLINE Vectorized<float> operator()(const Vectorized<float>& a) const { return on_sse2_halves(a, f); }
  C10_ALWAYS_INLINE Vectorized<float> operator()(const Vectorized<float>& a, const Vectorized<float>& b) const {
    return on_sse2_halves(a, b, f);
  }
  C10_ALWAYS_INLINE Sse2F operator()(Sse2F a) const { return f(a); }
  C10_ALWAYS_INLINE Sse2F operator()(Sse2F a, Sse2F b) const { return f(a, b); }
};
template <typename F>
C10_ALWAYS_INLINE LaneOp<F> lane_op(const F& f) {
  return LaneOp<F>{f};
}
template <typename Op>
inline constexpr bool kIsLaneOp = false;
template <typename F>
inline constexpr bool kIsLaneOp<LaneOp<F>> = true;
#else
template <typename F>
C10_ALWAYS_INLINE const F& lane_op(const F& f) {
  return f;
}
#endif

// 2^w in float: w = n + f with n = round(w), |f| <= 1/2 (exact), 2^f by a degree-5 polynomial (relative error
// 1.1e-7 with its fp32 coefficients), 2^n applied exactly. w is first clamped to [-151, 129] (NaN passes: the
// max/min operand order returns w when it is NaN), so that w = -inf gives 0 and w = +inf gives inf, and 2^n is
// representable in two factors. AVX-512 applies 2^n with vscalefps, AVX2 and the portable DEFAULT variant as two
// exponent-field factors 2^(n/2) 2^(n - n/2) (one rounding, into the subnormals included).
// 2^f for |f| <= 1/2: 1 + f Q(f), Q the relative minimax fit of tools/fit_exp2.py (2^0 = 1 exactly), in
// Horner's form (fast_exp2's core, the same instructions in every variant).
template <bool kBf16 = false, typename V>
C10_ALWAYS_INLINE V exp2_fraction(const V& f) {
  if constexpr (kBf16) {  // Q of degree 3: 2.8e-6 (tools/fit_exp2.py --degree 3)
    V p = vfmadd(V(9.582849219441414e-3f), f, V(5.590642988681793e-2f));
    p = vfmadd(p, f, V(2.4024099111557007e-1f));
    p = vfmadd(p, f, V(6.931241750717163e-1f));
    return vfmadd(p, f, V(1.0f));
  } else if constexpr (kSse2Lanes<V>) {  // Estrin's form (see kSse2Lanes): 3 levels, not 5 Horner steps
    const V f2 = f * f;
    const V a = vfmadd(V(6.931470036506653e-1f), f, V(1.0f));
    const V b = vfmadd(V(5.550733581185341e-2f), f, V(2.4022242426872253e-1f));
    const V c = vfmadd(V(1.3264722656458616e-3f), f, V(9.671512991189957e-3f));
    return vfmadd(vfmadd(c, f2, b), f2, a);
  }
  V p = vfmadd(V(1.3264722656458616e-3f), f, V(9.671512991189957e-3f));
  p = vfmadd(p, f, V(5.550733581185341e-2f));
  p = vfmadd(p, f, V(2.4022242426872253e-1f));
  p = vfmadd(p, f, V(6.931470036506653e-1f));
  return vfmadd(p, f, V(1.0f));
}

#if defined(NPU_EXT_SSE2_LANES)
// fast_exp2 on SSE2 lanes (x86-64's DEFAULT variant): the portable steps below (the same clamp, rounding to
// nearest and two exponent-field factors) in registers, where the generic Vectorized<float> keeps its lanes in
// memory and builds the factors one lane at a time. max(-151, w) and min(129, .) return w when it is NaN
// (SSE2's max/min return their second operand then), so NaN passes, and its factors (from cvtps2dq's
// 0x80000000) cannot make p's NaN anything else. exp2_fraction takes its Estrin form here (kSse2Lanes).
C10_ALWAYS_INLINE Sse2F fast_exp2(Sse2F w) {
  const __m128 wc = _mm_min_ps(_mm_set1_ps(129.0f), _mm_max_ps(_mm_set1_ps(-151.0f), w));
  const __m128 shifter = _mm_set1_ps(12582912.0f);
  const __m128 n = _mm_sub_ps(_mm_add_ps(wc, shifter), shifter);
  const Sse2F p = exp2_fraction(Sse2F(_mm_sub_ps(wc, n)));
  const __m128i ni = _mm_cvtps_epi32(n);
  const __m128i n1 = _mm_srai_epi32(ni, 1);
  const __m128i n2 = _mm_sub_epi32(ni, n1);
  const __m128i bias = _mm_set1_epi32(127);
  const __m128 s1 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n1, bias), 23));
  const __m128 s2 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(n2, bias), 23));
  return _mm_mul_ps(_mm_mul_ps(p, s1), s2);
}
#endif

C10_ALWAYS_INLINE Vectorized<float> fast_exp2(const Vectorized<float>& w) {
#if defined(CPU_CAPABILITY_AVX512)
  const __m512 wc = _mm512_min_ps(_mm512_set1_ps(129.0f), _mm512_max_ps(_mm512_set1_ps(-151.0f), w));
  const __m512 n = _mm512_roundscale_ps(wc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 p = exp2_fraction(Vectorized<float>(_mm512_sub_ps(wc, n)));
  return _mm512_scalef_ps(p, n);
#elif defined(CPU_CAPABILITY_AVX2)
  const __m256 wc = _mm256_min_ps(_mm256_set1_ps(129.0f), _mm256_max_ps(_mm256_set1_ps(-151.0f), w));
  const __m256 n = _mm256_round_ps(wc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 p = exp2_fraction(Vectorized<float>(_mm256_sub_ps(wc, n)));
  // n in [-151, 129] (a NaN w makes p NaN, whatever the factors): n1 = floor(n / 2), n2 = n - n1, both in
  // [-76, 65], so 2^n1 and 2^n2 are normal floats built in the exponent field.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
#elif defined(NPU_EXT_SSE2_LANES)
  return on_sse2_halves(w, [](Sse2F h) { return fast_exp2(h); });
#else
  // Portable (the DEFAULT variant off x86-64: NEON on aarch64, the generic at::vec arrays elsewhere): the same
  // polynomial and the same two exponent-field factors, written with plain arithmetic that the compiler
  // vectorizes, instead of at::vec's exp2, which maps to one libm call per lane when Sleef is not available to
  // an extension (as on aarch64). maximum/minimum propagate NaN; adding and subtracting 1.5 * 2^23 rounds to
  // the nearest integer (exact for |w| <= 2^22, and never folded without -ffast-math).
  using Vec = Vectorized<float>;
  constexpr int V = Vec::size();
  const Vec wc = at::vec::minimum(at::vec::maximum(w, Vec(-151.0f)), Vec(129.0f));
  const Vec shifter(12582912.0f);
  const Vec n = (wc + shifter) - shifter;
  const Vec p = exp2_fraction(wc - n);
  float nf[V], s1[V], s2[V];
  n.store(nf);
  for (int k = 0; k < V; ++k) {
    // n1 = floor(n / 2), n2 = n - n1 in [-76, 65] (a NaN lane makes p NaN; its factors are 1).
    const int32_t ni = nf[k] == nf[k] ? static_cast<int32_t>(nf[k]) : 0;
    const int32_t n1 = ni >> 1;
    const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23;
    const uint32_t b2 = static_cast<uint32_t>(ni - n1 + 127) << 23;
    std::memcpy(&s1[k], &b1, sizeof(float));
    std::memcpy(&s2[k], &b2, sizeof(float));
  }
  return p * Vec::loadu(s1) * Vec::loadu(s2);
#endif
}

// normal_tail's scale: e carries a factor 2^kTailScaleExp and r its inverse, kTailScale = 2^-kTailScaleExp.
constexpr int kTailScaleExp = 32;
constexpr double kTailScale = 1.0 / static_cast<double>(int64_t{1} << kTailScaleExp);

// 2^(n + kTailScaleExp) as a float, from ws = n + 1.5 * 2^23 for an integer n in [-kTailScaleExp - 127, 0]: the
// low bits of ws's significand hold n in two's complement, and one shift puts n into the exponent field, where
// the bias is added; n = -kTailScaleExp - 127 leaves the field 0, which is +0.
C10_ALWAYS_INLINE Vectorized<float> tail_pow2(const Vectorized<float>& ws) {
  constexpr int32_t kBias = (127 + kTailScaleExp) << 23;
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_slli_epi32(_mm512_castps_si512(ws), 23), _mm512_set1_epi32(kBias)));
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(ws), 23), _mm256_set1_epi32(kBias)));
#else
  constexpr int V = Vectorized<float>::size();
  float w[V], out[V];
  ws.store(w);
  for (int k = 0; k < V; ++k) {
    out[k] = c10::bit_cast<float>((c10::bit_cast<uint32_t>(w[k]) << 23) + static_cast<uint32_t>(kBias));
  }
  return Vectorized<float>::loadu(out);
#endif
}
#if defined(NPU_EXT_SSE2_LANES)
C10_ALWAYS_INLINE Sse2F tail_pow2(Sse2F ws) {
  constexpr int32_t kBias = (127 + kTailScaleExp) << 23;
  return _mm_castsi128_ps(_mm_add_epi32(_mm_slli_epi32(_mm_castps_si128(ws), 23), _mm_set1_epi32(kBias)));
}
#endif

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
// normal_tail's exponential on AVX2 and AVX-512, in eighths: 2^w = 2^(n8 / 8) 2^(f8 / 8) with n8 = round(8w) and
// |f8| <= 1/2. 2^(n8 / 8) = 2^(n8 >> 3) 2^((n8 & 7) / 8) comes whole from the exponent field and an 8-entry table of
// significands, looked up with one lane permute (vpermd: only the index's low 3 bits count, so ws's own bits index
// it), and 2^(f8 / 8) needs a polynomial of degree 3 where the full-binade 2^f of exp2_fraction takes degree 5:
// two multiply-adds fewer. The portable variant has no lane permute and keeps exp2_fraction.
#define NPU_EXT_EXP2_EIGHTHS 1

// 2^(f8 / 8) for |f8| <= 1/2: 1 + f8 Q(f8), Q fitted by tools/fit_exp2.py --eighths (relative error 2.7e-8 with
// fp32 coefficients; --eighths --degree 1 for bf16 results: 3.5e-6).
template <bool kBf16 = false>
C10_ALWAYS_INLINE Vectorized<float> exp2_eighth_fraction(const Vectorized<float>& f8) {
  using Vec = Vectorized<float>;
  Vec p;
  if constexpr (kBf16) {
    p = at::vec::fmadd(Vec(3.7535971496254206e-3f), f8, Vec(8.66636410355568e-2f));
  } else {
    p = at::vec::fmadd(Vec(1.0839105380000547e-4f), f8, Vec(3.7540255580097437e-3f));
    p = at::vec::fmadd(p, f8, Vec(8.664340525865555e-2f));
  }
  return at::vec::fmadd(p, f8, Vec(1.0f));
}

// 2^(n8 / 8 + kTailScaleExp) as a float, from ws = n8 + 1.5 * 2^23 for an integer n8 in [-8 (kTailScaleExp + 127),
// 0]: ws's low 12 bits hold n8 in two's complement, a shift by 20 puts n8 >> 3 into the exponent field (and
// j = n8 & 7 above the significand's top bits), and the table entry for j adds the bias, the significand of
// 2^(j / 8) rounded to fp32 (relative error <= 3.2e-8) and takes j << 20 back out. n8 = -8 (kTailScaleExp + 127)
// leaves the field 0 and j = 0, which is +0; n8 >> 3 = -(kTailScaleExp + 127) with j > 0 gives a subnormal whose
// products in normal_tail underflow to 0 all the same.
C10_ALWAYS_INLINE Vectorized<float> tail_pow2_eighths(const Vectorized<float>& ws) {
  constexpr uint32_t kBias = uint32_t(127 + kTailScaleExp) << 23;
  // significands of 2^(j / 8), j = 0..7, rounded to fp32
  constexpr uint32_t kSig[8] = {0x000000u, 0x0b95c2u, 0x1837f0u, 0x25fed7u, 0x3504f3u, 0x45672au, 0x5744fdu, 0x6ac0c7u};
#define NPU_EXT_EIGHTH(j) static_cast<int32_t>(kBias + kSig[j] - (uint32_t(j) << 20))
#if defined(CPU_CAPABILITY_AVX512)
  const __m512i table = _mm512_setr_epi32(NPU_EXT_EIGHTH(0), NPU_EXT_EIGHTH(1), NPU_EXT_EIGHTH(2), NPU_EXT_EIGHTH(3),
                                          NPU_EXT_EIGHTH(4), NPU_EXT_EIGHTH(5), NPU_EXT_EIGHTH(6), NPU_EXT_EIGHTH(7),
                                          NPU_EXT_EIGHTH(0), NPU_EXT_EIGHTH(1), NPU_EXT_EIGHTH(2), NPU_EXT_EIGHTH(3),
                                          NPU_EXT_EIGHTH(4), NPU_EXT_EIGHTH(5), NPU_EXT_EIGHTH(6), NPU_EXT_EIGHTH(7));
  const __m512i wi = _mm512_castps_si512(ws);  // vpermd on zmm reads 4 index bits: the table is there twice
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(wi, 20), _mm512_permutexvar_epi32(wi, table)));
#else
  const __m256i table = _mm256_setr_epi32(NPU_EXT_EIGHTH(0), NPU_EXT_EIGHTH(1), NPU_EXT_EIGHTH(2), NPU_EXT_EIGHTH(3),
                                          NPU_EXT_EIGHTH(4), NPU_EXT_EIGHTH(5), NPU_EXT_EIGHTH(6), NPU_EXT_EIGHTH(7));
  const __m256i wi = _mm256_castps_si256(ws);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(wi, 20), _mm256_permutevar8x32_epi32(table, wi)));
#endif
#undef NPU_EXT_EIGHTH
}
#endif

// The standard normal tail in fp32, as scaled factors: Phi(-|x|) = e * t * p with e = exp(-x^2/2) 2^32,
// t * p = erfcx(|x|/sqrt2) 2^-32 / 2 and t = 1 - s = K / (K + |x|), s = |x| / (K + |x|), K = 4 (no cancellation:
// gelu's cdf, forward and backward). kForward scales p by K as well, so that x Phi(-|x|) = -s * p * e for x < 0
// (|x| t = K s): two products, no third. A caller scales any other term it multiplies by e by 2^-32 as well. The
// scale keeps e a normal number wherever a product with it can be a nonzero fp32 number, so a single
// exponent-field factor builds it (tail_pow2, tail_pow2_eighths); for x^2 >= 220.5 (|x| >= 14.85,
// exp(-x^2/2) < 2^-159), where those products are under the smallest subnormal, e is 0.
// exp(-x^2/2) = 2^w, w = -x^2 log2(e) / 2 = n + f: n = round(w) by adding and removing 1.5 * 2^23 (exact for
// these w, never folded without -ffast-math), f = w - n with w unrounded (one fused multiply-add), 2^f from
// exp2_fraction (AVX2 and AVX-512: in eighths, see tail_pow2_eighths); x^2 is capped (NaN passes) so that
// n >= -159. p = 1/2 + s P7(s): s is one division and t one subtraction, P7 fitted by tools/fit_gelu_erfcx.py
// (relative minimax over |x| <= 14, which covers every x whose gelu or gelu gradient is a normal fp32 number):
// relative error 8.2e-8 with its fp32 coefficients. t = 1 - s carries s's rounding into t relatively amplified by
// s / t (3.5 at |x| = 14), where erfcx is a correction of 1/x^2 to the gradient's x / sqrt(2 pi) term; the
// forward, whose left tail is t * p itself, uses s alone. At x = 0, s = 0 and t = 1 exactly, so t * p * e = 1/2
// exactly. x = +-inf gives e = 0 and s = inf / inf = NaN: a caller that needs Phi there clamps x first. The
// same expression in every ISA variant but for the exponential's reduction. kBf16: for results rounded to bf16
// (8 significant bits), P of degree 5 and an exp2 polynomial one degree shorter (relative errors 3.3e-6 and
// 3.5e-6, 2.8e-6 in the portable variant, against bf16's half ulp of 2^-9 = 2e-3): three multiply-adds fewer, of
// the 20 or so that bound these kernels' speed. A result then rounds to the other neighbour of the exact value
// only within about 7e-6 of a midpoint (1 ulp); fp32 and fp16 keep the full polynomials.
template <bool kBf16 = false, bool kForward = false, typename Vec>
C10_ALWAYS_INLINE void normal_tail(const Vec& x, Vec& e, Vec& s, Vec& p) {
  constexpr float kScale = static_cast<float>(kTailScale) * (kForward ? 4.0f : 1.0f);  // (K 2^-32 or 2^-32)
  const Vec shifter(12582912.0f);
#if defined(NPU_EXT_EXP2_EIGHTHS)
  // in eighths (tail_pow2_eighths): 8w = x^2 * (-4 log2(e)), x^2 capped at 220.5 where round(8w) = -1272 = -8 * 159
  const Vec kMinus4Log2e(float(-4.0 * 1.4426950408889634));
  const Vec x_sq = vclamp_max(x * x, Vec(220.5f));
  const Vec ws = vfmadd(x_sq, kMinus4Log2e, shifter);
  e = exp2_eighth_fraction<kBf16>(vfmsub(x_sq, kMinus4Log2e, ws - shifter)) * tail_pow2_eighths(ws);
#else
  const Vec kMinusHalfLog2e(float(-0.5 * 1.4426950408889634));
  const Vec x_sq = vclamp_max(x * x, Vec(220.0f));
  const Vec ws = vfmadd(x_sq, kMinusHalfLog2e, shifter);
  e = exp2_fraction<kBf16>(vfmsub(x_sq, kMinusHalfLog2e, ws - shifter)) * tail_pow2(ws);
#endif
  const Vec ax = vabs(x);
  s = ax / (Vec(4.0f) + ax);  // K = 4 (tools/fit_gelu_erfcx.py)
  if constexpr (kBf16) {  // P of degree 5: 3.3e-6 (tools/fit_gelu_erfcx.py --degree 5)
    p = vfmadd(Vec(-0.07686958461999893f * kScale), s, Vec(0.176067516207695f * kScale));
    p = vfmadd(p, s, Vec(0.09268739074468613f * kScale));
    p = vfmadd(p, s, Vec(-0.8066293001174927f * kScale));
    p = vfmadd(p, s, Vec(1.309924840927124f * kScale));
    p = vfmadd(p, s, Vec(-1.0958493947982788f * kScale));
    p = vfmadd(p, s, Vec(0.5f * kScale));
  } else if constexpr (kSse2Lanes<Vec>) {
    // the same degree-8 polynomial in Estrin's form (see kSse2Lanes): 3 levels where Horner's form takes 8 steps
    const Vec s2 = s * s, s4 = s2 * s2;
    const Vec q0 = vfmadd(Vec(-1.0957660675048828f * kScale), s, Vec(0.5f * kScale));
    const Vec q1 = vfmadd(Vec(-0.7969099879264832f * kScale), s, Vec(1.3083596229553223f * kScale));
    const Vec q2 = vfmadd(Vec(0.19628939032554626f * kScale), s, Vec(0.06756842881441116f * kScale));
    const Vec q3 = vfmadd(Vec(-0.05397777259349823f * kScale), s, Vec(-0.05175934359431267f * kScale));
    const Vec upper = vfmadd(vfmadd(Vec(0.02599356323480606f * kScale), s2, q3), s2, q2);
    p = vfmadd(upper, s4, vfmadd(q1, s2, q0));
  } else {
    p = vfmadd(Vec(0.02599356323480606f * kScale), s, Vec(-0.05397777259349823f * kScale));
    p = vfmadd(p, s, Vec(-0.05175934359431267f * kScale));
    p = vfmadd(p, s, Vec(0.19628939032554626f * kScale));
    p = vfmadd(p, s, Vec(0.06756842881441116f * kScale));
    p = vfmadd(p, s, Vec(-0.7969099879264832f * kScale));
    p = vfmadd(p, s, Vec(1.3083596229553223f * kScale));
    p = vfmadd(p, s, Vec(-1.0957660675048828f * kScale));
    p = vfmadd(p, s, Vec(0.5f * kScale));
  }
}

// x's sign bit set ? a : b, lane-wise (-0.0 picks a; a NaN picks by its sign bit).
C10_ALWAYS_INLINE Vectorized<float> select_sign(const Vectorized<float>& x, const Vectorized<float>& a,
                                                const Vectorized<float>& b) {
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), b, a);
#elif defined(CPU_CAPABILITY_AVX2)
  return _mm256_blendv_ps(b, a, x);  // vblendvps selects by the mask's sign bits alone
#else
  constexpr int V = Vectorized<float>::size();
  float xv[V];
  int32_t m[V];
  x.store(xv);
  for (int k = 0; k < V; ++k) m[k] = c10::bit_cast<int32_t>(xv[k]) >> 31;  // arithmetic: all ones or zero
  return blend(b, a, Vectorized<float>::loadu(m));
#endif
}
#if defined(NPU_EXT_SSE2_LANES)
C10_ALWAYS_INLINE Sse2F select_sign(Sse2F x, Sse2F a, Sse2F b) {
  const __m128 m = _mm_castsi128_ps(_mm_srai_epi32(_mm_castps_si128(x), 31));  // all ones or zero
  return sse2_select(m, a, b);
}
#endif

// cond ? a : b with cond = (x < 0), lane-wise (NaN x: b).
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> select_negative(const Vectorized<T>& x, const Vectorized<T>& a, const Vectorized<T>& b) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
  }
#endif
  return blend(b, a, mask_lt(x, Vectorized<T>(T(0))));
}

// 1 / x in float: the hardware estimate refined by one Newton step (about 1 ulp; x finite and nonzero, or
// inf/nan giving nan), instead of a full-precision division. Other types and variants divide.
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> fast_reciprocal(const Vectorized<T>& x) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 r = _mm512_rcp14_ps(x);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(2.0f)));
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    const __m256 r = _mm256_rcp_ps(x);
    return _mm256_mul_ps(r, _mm256_fnmadd_ps(x, r, _mm256_set1_ps(2.0f)));
  }
#endif
  return Vectorized<T>(T(1)) / x;
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
