// grouped_bias_add_grad kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/cpu/vec.h"
#include "ops/grouped_bias_add/kernels.h"

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
// a chunk, and the chunk sums in chunk order: the result never depends on the number of threads, while the
// threads, sharing the tasks by rows, stay balanced whatever the group sizes (skewed, empty).
//
// Reading grad_y is the floor of this op, so the access pattern is what matters. Measured on an AMD EPYC Zen 5,
// 65536x512 fp32 (128 MB), 1 thread, as a fraction of the speed of grad_y.sum() (one read): adding 4 or 8 rows
// per pass over the accumulator (the previous kernel) walks that many interleaved 2 KB streams, which the
// hardware prefetchers follow badly (0.44-0.59x); one row at a time is one sequential stream per contiguous chunk
// (0.68x), and prefetching the row kPrefetchBytes ahead in software brings it to 0.78-0.9x (16-bit inputs:
// 0.9-1.25x, ATen's 16-bit sum being slower than the memory). Two rows per pass with the prefetch gains only
// where grad_y sits in the last-level cache (4096x1024 fp32, in a C loop: 1.08-1.14x against 0.98-1.05x with
// one) and loses beyond it (32 MB: 0.70-0.78x against 0.87-0.89x; 128 MB: 0.83-0.94x against 0.95-1.05x).
// Each task also prefetches, for writing, the row its sum goes to (out or the chunk buffer), which would otherwise
// miss on the store: with 2048 groups of 65536x512, 0.81 -> 0.88x of the floor (fp32, 1 thread), 0.87 -> 0.94x
// (bf16, 2 threads).
//
// Wide rows (measured on the Zen 5, 4096x8192 with 64 skewed groups, 1 thread, fraction of the floor, with no
// page faults in the timed calls; see Scratch):
// - Column blocks of at most 8192 columns for fp32 / fp64 inputs, 4096 for 16-bit ones (a 16 KB fp32
//   accumulator); a task walks its block of every row of its chunk. 16-bit: 0.96-0.99 with 4096-column blocks,
//   0.67-0.84 with 8192 (and four rows per pass).
// - fp32 blocks wider than kL1AccBytes (8 KB) take four rows per pass (see sum_rows): 8192 columns 0.67 -> 0.80,
//   and 0.86-0.91 (AVX-512) / 0.83 (AVX2) without the software prefetch; 4096 columns 0.75 -> 0.87; 2048
//   columns stay at one row per pass (0.90 against 0.86-0.88).
// - At least kMinChunkRows rows per chunk, so that wide rows make few chunk sums (16 rows of 8192 columns made
//   8 MB of them for a 128 MB input): 0.58 -> 0.67 (one row per pass), 0.70 -> 0.80 (four).
// - 16-bit rows of two column blocks read each row as two 8 KB halves, 64 rows apart. At 2 threads the VM has
//   stretches where that costs: 4096x8192 bf16 0.73-0.76 where 8192x4096 (whole rows) reads at 0.93-0.95, and
//   1.02-1.17 in other stretches. Tried in a slow stretch: prefetching the row's next half for the next task
//   (0.71-0.75; 1 thread 0.96 -> 0.74-0.78), the halves of 4-16 rows in turn through two accumulators
//   (0.63-0.65; 1 thread 0.64-0.66), 8192-column blocks and four rows per pass (0.78-0.80; 1 thread 0.79-0.80),
//   8192-column blocks, one row per pass, prefetching 4-6 KB ahead in the stream (0.79-0.84; 1 thread 0.77-0.83:
//   a 32 KB accumulator and the 16 KB row it streams overflow the 48 KB L1D).
template <typename scalar_t>
constexpr int64_t kColsOf = kReduced<scalar_t> ? 4096 : 8192;
constexpr int64_t kChunkElems = 1 << 17;     // target elements per chunk: 256 KB of fp16, 512 KB of fp32,
constexpr int64_t kMinChunkRows = 64;        // but at least this many rows (wide rows: fewer chunk sums)
constexpr int64_t kPrefetchBytes = 8192;     // prefetch distance, in whole rows (at least one)
constexpr int64_t kL1AccBytes = 8192;        // an accumulator block wider than this takes 4 rows per pass
// Outputs of at least kStreamOutBytes, from inputs of at least kStreamInBytes, are written with non-temporal
// stores (AVX2 / AVX-512; see store_rounded_streaming): a normal store first reads the line it writes (the
// prefetch for writing below only moves that read earlier), and with an input this much larger than a last-level
// cache share, the rows written early are evicted before the call ends anyway. Zen 5, 65536x512 fp32 with 2048
// groups (a 4 MB output): 0.88-0.93 -> 0.91-0.97x of the floor at 2 threads, 0.88 -> 0.91x at 1 thread.
// Smaller outputs gain nothing measurable, and a consumer that reads the output right after finds it in cache.
constexpr int64_t kStreamOutBytes = int64_t(1) << 20;
constexpr int64_t kStreamInBytes = int64_t(64) << 20;

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

// acc[0:w] += rows[0][0:w], then += rows[1][0:w], and so on: N rows per pass over the accumulator, each element
// taking the same additions in the same order as N passes of one row.
template <int N, typename scalar_t>
C10_ALWAYS_INLINE void add_rows(at::opmath_type<scalar_t>* acc, const scalar_t* const (&rows)[N], int64_t w,
                                int64_t ahead) {
#if defined(NPU_EXT_SSE2_LANES)
  if constexpr (kReduced<scalar_t> && N == 1) return add_row_sse2(acc, rows[0], w, ahead);
#endif
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  constexpr int64_t K = P::kSize;
  constexpr int64_t V = Vec::size();
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(scalar_t));         // elements per cache line
  constexpr int64_t kStep = std::max<int64_t>(K, 256 / static_cast<int64_t>(sizeof(scalar_t)));  // per iteration
  const auto add = [&](int64_t h) {
    P p[N];
    for (int n = 0; n < N; ++n) p[n] = P::load_elementwise(rows[n] + h);
    for (int k = 0; k < P::kVecs; ++k) {
      Vec a = Vec::loadu(acc + h + k * V);
      for (int n = 0; n < N; ++n) a = a + p[n].v[k];
      a.store(acc + h + k * V);
    }
  };
  int64_t h = 0;
  for (; h + kStep <= w; h += kStep) {
    if (ahead != 0) {
      for (int n = 0; n < N; ++n) {
        for (int64_t l = 0; l < kStep; l += kLine) __builtin_prefetch(rows[n] + h + ahead + l);
      }
    }
    for (int64_t u = 0; u < kStep; u += K) add(h + u);
  }
  for (; h + K <= w; h += K) add(h);
  for (; h < w; ++h) {
    for (int n = 0; n < N; ++n) acc[h] += static_cast<at::opmath_type<scalar_t>>(rows[n][h]);
  }
}

// acc[0:w] = the sum of rows r0 <= r < r1 of a group (row r at first + r * row_stride), in row order. Strided
// columns are gathered first. One row per pass: each row prefetches the same columns of the row at least
// kPrefetchBytes ahead, line by line as it goes (a burst of prefetches per row would overflow the miss queues for
// wide rows). An accumulator wider than kL1AccBytes, which does not stay in L1 beside the row stream, takes four
// rows per pass instead, with no software prefetch (four sequential streams, which the hardware prefetchers
// follow), except on the generic lanes of x86's DEFAULT variant, where the loop is bound by instructions rather
// than by memory (4096x8192 fp32: 4.3 ms with one row per pass, 5.8 ms with four).
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
      add_rows<1>(acc, {gathered.data()}, w, 0);
    }
    return;
  }
  int64_t r = r0;
  if constexpr (!kReduced<scalar_t> && !kGenericLanes<acc_t>) {
    if (w * static_cast<int64_t>(sizeof(acc_t)) > kL1AccBytes) {
      const auto row = [&](int64_t i) { return first + (r + i) * row_stride; };
      for (; r + 4 <= r1; r += 4) add_rows<4>(acc, {row(0), row(1), row(2), row(3)}, w, 0);
    }
  }
  const int64_t row_bytes = w * static_cast<int64_t>(sizeof(scalar_t));
  const int64_t ahead = (kPrefetchBytes + row_bytes - 1) / row_bytes * row_stride;  // elements
  for (; r < r1; ++r) add_rows<1>(acc, {first + r * row_stride}, w, ahead);
}

// Brings the lines of [p, p + bytes) into the cache for writing ahead of a store that would otherwise miss.
C10_ALWAYS_INLINE void prefetch_for_write(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t l = 0; l < bytes; l += 64) __builtin_prefetch(c + l, 1);
}

// The chunk sums' memory, kept by the calling thread for its next call up to kKeptScratchBytes. Memory freed
// by a call goes back to the kernel when glibc trims its heap or unmaps the block, and a fresh allocation then
// comes as fresh pages: 4096x8192 fp32 with 64 skewed groups (2 MB of chunk sums) took 508 page faults per call
// in some processes and none in others, 5.0 against 3.5 ms on the Zen 5 at 1 thread. Larger buffers (more
// than 1/16 of an input beyond 256 MB) are allocated per call: their faults are a small part of such a call.
constexpr size_t kKeptScratchBytes = size_t(16) << 20;

template <typename T>
class Scratch {
 public:
  explicit Scratch(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes > kKeptScratchBytes) {
      own_.reset(new char[bytes]);
      data_ = reinterpret_cast<T*>(own_.get());
      return;
    }
    thread_local std::unique_ptr<char[]> kept;
    thread_local size_t kept_bytes = 0;
    if (kept_bytes < bytes) {
      kept.reset();  // before allocating the new one, so that its memory can be reused
      kept_bytes = 0;
      kept.reset(new char[bytes]);
      kept_bytes = bytes;
    }
    data_ = reinterpret_cast<T*>(kept.get());
  }
  T* get() const { return data_; }

 private:
  std::unique_ptr<char[]> own_;
  T* data_ = nullptr;
};

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

// store_rounded with non-temporal stores (x86's AVX2 and AVX-512 variants), where out starts on a whole vector
// and w is a whole number of them; false, with nothing written, elsewhere. The caller fences (_mm_sfence) after.
template <typename scalar_t>
bool store_rounded_streaming(scalar_t* out, const at::opmath_type<scalar_t>* acc, int64_t w) {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  using Raw = Vectorized<scalar_t>;
  constexpr int64_t K = P::kSize;
  if (reinterpret_cast<uintptr_t>(out) % sizeof(Raw) != 0 || w % K != 0) return false;
  for (int64_t h = 0; h < w; h += K) {
    P p;
    for (int k = 0; k < P::kVecs; ++k) p.v[k] = Vec::loadu(acc + h + k * Vec::size());
    const Raw raw = p.narrow_elementwise();
#if defined(CPU_CAPABILITY_AVX512)
    static_assert(sizeof(Raw) == sizeof(__m512i), "one register");
    __m512i bits;
    std::memcpy(&bits, &raw, sizeof(bits));
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out + h), bits);
#else
    static_assert(sizeof(Raw) == sizeof(__m256i), "one register");
    __m256i bits;
    std::memcpy(&bits, &raw, sizeof(bits));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out + h), bits);
#endif
  }
  return true;
#else
  (void)out, (void)acc, (void)w;
  return false;
#endif
}

template <typename scalar_t>
void grouped_bias_add_grad_impl(const scalar_t* base, const GroupedRows& L, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t H = L.hidden;
  const int64_t G = static_cast<int64_t>(L.rows.size());
  constexpr int64_t kCols = kColsOf<scalar_t>;
  // A chunk sum is copied to `partial` at column h0 in the accumulator's lane order and rounded by a second
  // pass over the whole row (store_rounded from column 0): both agree only if every block starts on a whole Pack.
  static_assert(kCols % Pack<scalar_t>::kSize == 0, "column blocks must start on a whole Pack");
  const int64_t col_blocks = (H + kCols - 1) / kCols;
  const int64_t chunk_rows = std::max<int64_t>(kMinChunkRows, kChunkElems / std::max<int64_t>(H, 1));

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
  Scratch<acc_t> partial(static_cast<size_t>(nslots * H));

  // Empty groups: zeros.
  for (int64_t j = 0; j < G; ++j) {
    if (L.rows[j] == 0) std::fill(out + j * H, out + (j + 1) * H, scalar_t(0));
  }

  // Task t = chunk (t / col_blocks), column block (t % col_blocks); chunk c belongs to the group j with
  // first_chunk[j] <= c < first_chunk[j + 1]. The threads share the tasks by rows, not by count (a chunk of a
  // small group has fewer rows than kMinChunkRows): task t starts at row task_row[t] of the col_blocks * N rows
  // to read, and belongs to the thread whose range holds that row.
  const int64_t ntasks = nchunks * col_blocks;
  std::vector<int64_t> task_row(static_cast<size_t>(ntasks) + 1, 0);
  for (int64_t j = 0, t = 0; j < G; ++j) {
    for (int64_t c = first_chunk[j]; c < first_chunk[j + 1]; ++c) {
      const int64_t rows = std::min(chunk_rows, L.rows[j] - (c - first_chunk[j]) * chunk_rows);
      for (int64_t b = 0; b < col_blocks; ++b, ++t) task_row[t + 1] = task_row[t] + rows;
    }
  }
  const int64_t in_bytes = task_row[ntasks] / col_blocks * H * static_cast<int64_t>(sizeof(scalar_t));
  const bool stream = G * H * static_cast<int64_t>(sizeof(scalar_t)) >= kStreamOutBytes && in_bytes >= kStreamInBytes;
  at::parallel_for(0, task_row[ntasks], 1, [&](int64_t begin, int64_t end) {
    const int64_t t0 = std::lower_bound(task_row.begin(), task_row.end() - 1, begin) - task_row.begin();
    const int64_t t1 = std::lower_bound(task_row.begin(), task_row.end() - 1, end) - task_row.begin();
    if (t0 == t1) return;
    std::vector<scalar_t> gathered;
    // The accumulator on a cache-line boundary: an unaligned vector store may split a line.
    std::vector<acc_t> acc_buf(static_cast<size_t>(std::min(kCols, H)) + 64 / sizeof(acc_t));
    acc_t* acc = reinterpret_cast<acc_t*>((reinterpret_cast<uintptr_t>(acc_buf.data()) + 63) & ~uintptr_t(63));
    int64_t j = std::upper_bound(first_chunk.begin(), first_chunk.end(), t0 / col_blocks) - first_chunk.begin() - 1;
    [[maybe_unused]] bool streamed = false;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = t / col_blocks, h0 = (t % col_blocks) * kCols;
      while (c >= first_chunk[j + 1]) ++j;
      const int64_t w = std::min(kCols, H - h0);
      const int64_t r0 = (c - first_chunk[j]) * chunk_rows, r1 = std::min(L.rows[j], r0 + chunk_rows);
      scalar_t* const dst = slot[j] < 0 ? out + j * H + h0 : nullptr;
      acc_t* const dst_partial = slot[j] < 0 ? nullptr : partial.get() + (slot[j] + c - first_chunk[j]) * H + h0;
      if (dst != nullptr) {
        if (!stream) prefetch_for_write(dst, w * static_cast<int64_t>(sizeof(scalar_t)));
      } else {
        prefetch_for_write(dst_partial, w * static_cast<int64_t>(sizeof(acc_t)));
      }
      sum_rows(acc, base + L.group_base[j] + h0 * L.col_stride, r0, r1, L.row_stride, L.col_stride, w, gathered);
      if (dst == nullptr) {
        std::copy(acc, acc + w, dst_partial);
      } else if (stream && store_rounded_streaming(dst, acc, w)) {
        streamed = true;
      } else {
        store_rounded(dst, acc, w);
      }
    }
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
    if (streamed) _mm_sfence();
#endif
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
