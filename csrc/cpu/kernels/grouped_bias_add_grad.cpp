// grouped_bias_add_grad kernels (compiled once per ISA variant, see kernels.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_utils.h"

namespace npu_ext {
namespace cpu {
namespace CPU_CAPABILITY {
namespace {

// Two partitions, chosen from the shape alone (never from the thread count):
//  * column tasks, when there are enough (group, column block) pairs to feed the threads: one task sums
//    every row of its group for kCols columns, in row order; no partial sums at all;
//  * row tasks otherwise (few groups, few columns): each group is cut into tasks of a fixed number of rows,
//    and the task partial sums are combined in task order.
// Column h of a sum is accumulated row by row, in row order, by one lane (vector or scalar), so vector and
// scalar paths give identical bits and the result does not depend on the number of threads.
constexpr int64_t kCols = 1024;        // columns per column task (a multiple of every vector width)
constexpr int64_t kMinColTasks = 16;   // use column tasks when there are at least this many
constexpr int64_t kBlock = 32768;      // target elements per row task
constexpr int kRowsAtOnce = 8;         // rows added per pass over the accumulator

// acc[0:w] += rows[0][0:w]; acc += rows[1]; ... (nr <= kRowsAtOnce contiguous rows, in order), in fp32/fp64.
template <typename scalar_t>
void add_rows(at::opmath_type<scalar_t>* acc, const scalar_t* const* rows, int nr, int64_t w) {
  using P = Pack<scalar_t>;
  using Vec = typename P::Vec;
  constexpr int64_t K = P::kSize;
  constexpr int64_t V = Vec::size();
  int64_t h = 0;
  for (; h + K <= w; h += K) {
    Vec a[P::kVecs];
    for (int k = 0; k < P::kVecs; ++k) a[k] = Vec::loadu(acc + h + k * V);
    for (int r = 0; r < nr; ++r) {
      const P p = P::load(rows[r] + h);
      for (int k = 0; k < P::kVecs; ++k) a[k] = a[k] + p.v[k];
    }
    for (int k = 0; k < P::kVecs; ++k) a[k].store(acc + h + k * V);
  }
  for (; h < w; ++h) {
    for (int r = 0; r < nr; ++r) acc[h] += static_cast<at::opmath_type<scalar_t>>(rows[r][h]);
  }
}

// acc[0:w] += every row r0 <= r < r1 of a group, in order. Strided rows are gathered first.
template <typename scalar_t>
void add_row_range(at::opmath_type<scalar_t>* acc, const scalar_t* first, int64_t r0, int64_t r1,
                   int64_t row_stride, int64_t col_stride, int64_t w, std::vector<scalar_t>& gathered) {
  const scalar_t* rows[kRowsAtOnce];
  if (col_stride != 1) {
    gathered.resize(static_cast<size_t>(w));
    for (int64_t r = r0; r < r1; ++r) {
      const scalar_t* row = first + r * row_stride;
      for (int64_t h = 0; h < w; ++h) gathered[h] = row[h * col_stride];
      rows[0] = gathered.data();
      add_rows(acc, rows, 1, w);
    }
    return;
  }
  for (int64_t r = r0; r < r1; r += kRowsAtOnce) {
    const int nr = static_cast<int>(std::min<int64_t>(kRowsAtOnce, r1 - r));
    for (int k = 0; k < nr; ++k) rows[k] = first + (r + k) * row_stride;
    add_rows(acc, rows, nr, w);
  }
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
    p.store(out + h);
  }
  for (; h < H; ++h) out[h] = static_cast<scalar_t>(acc[h]);
}

template <typename scalar_t>
void grouped_bias_add_grad_impl(const scalar_t* base, const GroupedRows& L, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t H = L.hidden;
  const int64_t G = static_cast<int64_t>(L.rows.size());
  const int64_t col_blocks = (H + kCols - 1) / kCols;

  if (G * col_blocks >= kMinColTasks) {
    at::parallel_for(0, G * col_blocks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<scalar_t> gathered;
      acc_t acc[kCols];
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j = t / col_blocks, h0 = (t % col_blocks) * kCols;
        const int64_t w = std::min(kCols, H - h0);
        std::fill(acc, acc + w, acc_t(0));
        add_row_range(acc, base + L.group_base[j] + h0 * L.col_stride, 0, L.rows[j], L.row_stride, L.col_stride, w,
                      gathered);
        store_rounded(out + j * H + h0, acc, w);
      }
    });
    return;
  }

  const int64_t rows_per_task = std::max<int64_t>(1, kBlock / std::max<int64_t>(H, 1));
  std::vector<int64_t> first_task(G + 1, 0);  // tasks of group j: [first_task[j], first_task[j + 1])
  for (int64_t j = 0; j < G; ++j)
    first_task[j + 1] = first_task[j] + (L.rows[j] + rows_per_task - 1) / rows_per_task;
  const int64_t ntasks = first_task[G];
  std::vector<acc_t> partial(static_cast<size_t>(ntasks * H), acc_t(0));

  // Task t belongs to group j = upper_bound(first_task, t) - 1.
  at::parallel_for(0, ntasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<scalar_t> gathered;
    int64_t j = std::upper_bound(first_task.begin(), first_task.end(), t0) - first_task.begin() - 1;
    for (int64_t t = t0; t < t1; ++t) {
      while (t >= first_task[j + 1]) ++j;
      const int64_t r0 = (t - first_task[j]) * rows_per_task;
      const int64_t r1 = std::min(L.rows[j], r0 + rows_per_task);
      add_row_range(partial.data() + t * H, base + L.group_base[j], r0, r1, L.row_stride, L.col_stride, H,
                    gathered);
    }
  });

  at::parallel_for(0, G, 1, [&](int64_t j0, int64_t j1) {
    std::vector<acc_t> sum(H);
    for (int64_t j = j0; j < j1; ++j) {
      std::fill(sum.begin(), sum.end(), acc_t(0));
      for (int64_t t = first_task[j]; t < first_task[j + 1]; ++t) add_acc(sum.data(), partial.data() + t * H, H);
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
