// grouped_bias_add_grad kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_utils.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// One partition, chosen from the shape and dtype alone (never from the thread count): every group is cut into
// chunks of `chunk_rows` consecutive rows (the last one shorter), and H into blocks of at most kColsOf columns.
// A task sums one chunk over one column block, streaming the chunk's rows in order
// through an fp32 (fp64) accumulator of the block's width that stays in L1/L2. A group of one chunk is
// written from its accumulator directly; the chunk sums of a longer group go to a buffer and are added in
// chunk order by a second, short pass. So column h of every sum is accumulated row by row in row order within
// a chunk, and the chunk sums in chunk order: the result never depends on the number of threads, while tasks
// of nearly equal size keep the threads balanced whatever the group sizes (skewed, empty).
//
// Reading grad_y is the floor of this op, so the access pattern is what matters. Measured on an AMD EPYC Zen 5,
// 65536x512 fp32 (128 MB), 1 thread, as a fraction of the speed of grad_y.sum() (one read): adding 4 or 8 rows
// per pass over the accumulator (the previous kernel) walks that many interleaved 2 KB streams, which the
// hardware prefetchers follow badly (0.44-0.59x); one row at a time is one sequential stream per contiguous chunk
// (0.68x), and prefetching the row kPrefetchBytes ahead in software brings it to 0.78-0.9x (16-bit inputs:
// 0.9-1.25x, ATen's 16-bit sum being slower than the memory). Each task also prefetches, for writing, the row
// its sum goes to (out or the chunk buffer), which would otherwise miss on the store: with 2048 groups of 65536x512,
// 0.81 -> 0.88x of the floor (fp32, 1 thread), 0.87 -> 0.94x (bf16, 2 threads).
//
// Widest column block: 8192 columns for fp32 inputs (a 32 KB accumulator), 4096 for 16-bit ones (16 KB). Rows
// wider than this are summed block by block, each task walking its block of every row of its chunk.
// Measured on the Zen 5, 4096x8192 and 2048x16384, 64 groups, 1 / 2 threads, fraction of the floor: bf16 with
// 8192-column blocks 0.49 / 0.58 and 0.43 / 0.42, with 4096 0.72 / 0.64 and 0.55 / 0.52 (2048: the same); fp32
// with 4096 or 2048 columns no faster than with 8192 (0.53-0.62 / 0.71-0.79 against 0.62 / 0.79). Wide rows stay
// below the floor's 0.8x (docs/performance.md): the accumulator row no longer fits in L1 beside the stream (in a C
// microbenchmark, 32 KB of accumulator cost 3.62 ms per 128 MB against 2.87 ms for 8 KB, the same loads and stores).
template <typename scalar_t>
constexpr int64_t kColsOf = kReduced<scalar_t> ? 4096 : 8192;
constexpr int64_t kChunkElems = 1 << 17;     // target elements per chunk: 256 KB of fp16, 512 KB of fp32
constexpr int64_t kPrefetchBytes = 8192;     // prefetch distance, in whole rows (at least one)

// acc[0:w] += row[0:w], in fp32/fp64, prefetching the lines `ahead` elements past the ones read (0: none).
// The accumulator holds each whole vector of the row in Pack::load_elementwise's lane order (bf16 on AVX2 and
// AVX-512: even elements, then odd ones), which every step here keeps (lane-wise adds) and store_rounded undoes;
// the scalar tail is in element order. On Zen 5, 4096x1024 bf16, 1 thread, this order took the AVX2 kernel from
// 0.162 to 0.135 ms and the AVX-512 one from 0.095 to 0.084 ms (in-order widening is two lane shuffles a vector).
// 256 bytes of the row per iteration: four independent accumulator updates in flight (in a C microbenchmark
// of this loop on L3-resident data, one 64-byte vector per iteration ran 5-25% slower).
#if defined(NPU_EXT_SSE2_LANES)
// x86-64's DEFAULT variant, 16-bit rows: at::vec's generic Pack widens through arrays in memory (0.62x of the
// floor for bf16 at 8 MB); SSE2 directly, 64 bytes of the row per iteration, is 1.0x.
template <typename scalar_t>
C10_ALWAYS_INLINE void add_row_sse2(float* acc, const scalar_t* row, int64_t w, int64_t ahead) {
  const auto add8 = [&](int64_t h) {
    __m128 lo, hi;
    sse2_widen8<std::is_same_v<scalar_t, c10::BFloat16>>(reinterpret_cast<const uint16_t*>(row + h), lo, hi);
    _mm_storeu_ps(acc + h, _mm_add_ps(_mm_loadu_ps(acc + h), lo));
    _mm_storeu_ps(acc + h + 4, _mm_add_ps(_mm_loadu_ps(acc + h + 4), hi));
  };
  int64_t h = 0;
  for (; h + 32 <= w; h += 32) {
    if (ahead != 0) __builtin_prefetch(row + h + ahead);
    add8(h);
    add8(h + 8);
    add8(h + 16);
    add8(h + 24);
  }
  for (; h + 8 <= w; h += 8) add8(h);
  for (; h < w; ++h) acc[h] += static_cast<float>(row[h]);
}
#endif

template <typename scalar_t>
C10_ALWAYS_INLINE void add_row(at::opmath_type<scalar_t>* acc, const scalar_t* row, int64_t w, int64_t ahead) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (kReduced<scalar_t>) return add_row_sse2(acc, row, w, ahead);
#endif
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  constexpr int64_t K = P::kSize;
  constexpr int64_t V = Vec::size();
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(scalar_t));         // elements per cache line
  constexpr int64_t kStep = std::max<int64_t>(K, 256 / static_cast<int64_t>(sizeof(scalar_t)));  // per iteration
  int64_t h = 0;
  for (; h + kStep <= w; h += kStep) {
    if (ahead != 0) {
      for (int64_t l = 0; l < kStep; l += kLine) __builtin_prefetch(row + h + ahead + l);
    }
    for (int64_t u = 0; u < kStep; u += K) {
      const P p = P::load_elementwise(row + h + u);
      for (int k = 0; k < P::kVecs; ++k) (Vec::loadu(acc + h + u + k * V) + p.v[k]).store(acc + h + u + k * V);
    }
  }
  for (; h + K <= w; h += K) {
    const P p = P::load_elementwise(row + h);
    for (int k = 0; k < P::kVecs; ++k) (Vec::loadu(acc + h + k * V) + p.v[k]).store(acc + h + k * V);
  }
  for (; h < w; ++h) acc[h] += static_cast<at::opmath_type<scalar_t>>(row[h]);
}

// acc[0:w] = the sum of rows r0 <= r < r1 of a group (row r at first + r * row_stride), in row order. Strided
// columns are gathered first. Each row prefetches the same columns of the row at least kPrefetchBytes ahead,
// line by line as it goes (a burst of prefetches per row would overflow the miss queues for wide rows).
template <typename scalar_t>
void sum_rows(at::opmath_type<scalar_t>* acc, const scalar_t* first, int64_t r0, int64_t r1, int64_t row_stride,
              int64_t col_stride, int64_t w, std::vector<scalar_t>& gathered) {
  using acc_t = at::opmath_type<scalar_t>;
  std::fill(acc, acc + w, acc_t(0));
  if (col_stride != 1) {
    gathered.resize(static_cast<size_t>(w));
    for (int64_t r = r0; r < r1; ++r) {
      const scalar_t* row = first + r * row_stride;
      for (int64_t h = 0; h < w; ++h) gathered[h] = row[h * col_stride];
      add_row(acc, gathered.data(), w, 0);
    }
    return;
  }
  const int64_t row_bytes = w * static_cast<int64_t>(sizeof(scalar_t));
  const int64_t ahead = (kPrefetchBytes + row_bytes - 1) / row_bytes * row_stride;  // elements
  for (int64_t r = r0; r < r1; ++r) add_row(acc, first + r * row_stride, w, ahead);
}

// Brings the lines of [p, p + bytes) into the cache for writing ahead of a store that would otherwise miss.
C10_ALWAYS_INLINE void prefetch_for_write(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t l = 0; l < bytes; l += 64) __builtin_prefetch(c + l, 1);
}

template <typename acc_t>
void add_acc(acc_t* acc, const acc_t* src, int64_t H) {
  using Vec = Vectorized<acc_t>;
  int64_t h = 0;
  for (; h + Vec::size() <= H; h += Vec::size()) (Vec::loadu(acc + h) + Vec::loadu(src + h)).store(acc + h);
  for (; h < H; ++h) acc[h] += src[h];
}

template <typename scalar_t>
void store_rounded(scalar_t* out, const at::opmath_type<scalar_t>* acc, int64_t H) {
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  constexpr int64_t K = P::kSize;
  int64_t h = 0;
  for (; h + K <= H; h += K) {
    P p;
    for (int k = 0; k < P::kVecs; ++k) p.v[k] = Vec::loadu(acc + h + k * Vec::size());
    p.store_elementwise(out + h);
  }
  for (; h < H; ++h) out[h] = static_cast<scalar_t>(acc[h]);
}

template <typename scalar_t>
void grouped_bias_add_grad_impl(const scalar_t* base, const GroupedRows& L, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t H = L.hidden;
  const int64_t G = static_cast<int64_t>(L.rows.size());
  constexpr int64_t kCols = kColsOf<scalar_t>;
  const int64_t col_blocks = (H + kCols - 1) / kCols;
  const int64_t chunk_rows = std::max<int64_t>(1, kChunkElems / std::max<int64_t>(H, 1));

  // Chunks of group j: [first_chunk[j], first_chunk[j + 1]); a group of 0 or 1 chunk needs no buffer.
  std::vector<int64_t> first_chunk(G + 1, 0);
  for (int64_t j = 0; j < G; ++j) first_chunk[j + 1] = first_chunk[j] + (L.rows[j] + chunk_rows - 1) / chunk_rows;
  const int64_t nchunks = first_chunk[G];
  std::vector<int64_t> slot(G, -1);  // group j's chunk sums start at row slot[j] of `partial` (-1: none)
  int64_t nslots = 0;
  for (int64_t j = 0; j < G; ++j) {
    if (first_chunk[j + 1] - first_chunk[j] > 1) {
      slot[j] = nslots;
      nslots += first_chunk[j + 1] - first_chunk[j];
    }
  }
  // Not zeroed: the tasks write every element before the second pass reads it.
  std::unique_ptr<acc_t[]> partial(new acc_t[static_cast<size_t>(nslots * H)]);

  // Empty groups: zeros.
  for (int64_t j = 0; j < G; ++j) {
    if (L.rows[j] == 0) std::fill(out + j * H, out + (j + 1) * H, scalar_t(0));
  }

  // Task t = chunk (t / col_blocks), column block (t % col_blocks); chunk c belongs to the group j with
  // first_chunk[j] <= c < first_chunk[j + 1].
  at::parallel_for(0, nchunks * col_blocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<scalar_t> gathered;
    // The accumulator on a cache-line boundary: an unaligned vector store may split a line.
    std::vector<acc_t> acc_buf(static_cast<size_t>(std::min(kCols, H)) + 64 / sizeof(acc_t));
    acc_t* acc = reinterpret_cast<acc_t*>((reinterpret_cast<uintptr_t>(acc_buf.data()) + 63) & ~uintptr_t(63));
    int64_t j = std::upper_bound(first_chunk.begin(), first_chunk.end(), t0 / col_blocks) - first_chunk.begin() - 1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = t / col_blocks, h0 = (t % col_blocks) * kCols;
      while (c >= first_chunk[j + 1]) ++j;
      const int64_t w = std::min(kCols, H - h0);
      const int64_t r0 = (c - first_chunk[j]) * chunk_rows, r1 = std::min(L.rows[j], r0 + chunk_rows);
      scalar_t* const dst = slot[j] < 0 ? out + j * H + h0 : nullptr;
      acc_t* const dst_partial = slot[j] < 0 ? nullptr : partial.get() + (slot[j] + c - first_chunk[j]) * H + h0;
      if (dst != nullptr) {
        prefetch_for_write(dst, w * static_cast<int64_t>(sizeof(scalar_t)));
      } else {
        prefetch_for_write(dst_partial, w * static_cast<int64_t>(sizeof(acc_t)));
      }
      sum_rows(acc, base + L.group_base[j] + h0 * L.col_stride, r0, r1, L.row_stride, L.col_stride, w, gathered);
      if (dst != nullptr) {
        store_rounded(dst, acc, w);
      } else {
        std::copy(acc, acc + w, dst_partial);
      }
    }
  });
  if (nslots == 0) return;

  // Groups of several chunks: their chunk sums added in chunk order.
  at::parallel_for(0, G, 1, [&](int64_t j0, int64_t j1) {
    std::vector<acc_t> sum(H);
    for (int64_t j = j0; j < j1; ++j) {
      if (slot[j] < 0) continue;
      const acc_t* p = partial.get() + slot[j] * H;
      std::copy(p, p + H, sum.begin());
      for (int64_t c = 1; c < first_chunk[j + 1] - first_chunk[j]; ++c) add_acc(sum.data(), p + c * H, H);
      store_rounded(out + j * H, sum.data(), H);
    }
  });
}

}  // namespace

void grouped_bias_add_grad_kernel(const at::Tensor& grad_y, const GroupedRows& layout, const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_y.scalar_type(), "grouped_bias_add_grad", [&] {
    grouped_bias_add_grad_impl<scalar_t>(grad_y.const_data_ptr<scalar_t>(), layout, out.mutable_data_ptr<scalar_t>());
  });
}

}  // namespace CPU_CAPABILITY
}  // namespace cpu
}  // namespace npu_ext
