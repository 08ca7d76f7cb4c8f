// gemm_testing.h — a check shared by the CPU GEMM tests (test_sgemm.cpp,
// test_bf16.cpp): a product cut into pieces of rows or of columns, as
// linear_ops.h and conv2d_ops.h cut theirs over threads, gives the bits of
// one call, and a repeated call (after another shape has grown and refilled
// the pack buffers) gives them again: each element's sum order must depend
// on K alone.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"

namespace hpmc::testing {

// The CPU GEMMs' signature: C = alpha·op(A)·op(B) + beta·C, row-major.
using CpuGemmFn = void (*)(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c,
                           int ldc);

// C = bias + op(A)·op(B) (m×n, depth k, random operands from `seed`), for
// every transpose: whole, in columns cut at 1, 17, 54, in rows cut at 3, 40,
// and once more after a product of another shape; every result's bits equal.
inline void expect_pieces_and_repeats_bit_identical(CpuGemmFn f, int m, int n, int k,
                                                    uint64_t seed) {
  Rng rng(seed);
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(std::string(ta ? "T" : "N") + (tb ? "T" : "N"));
    std::vector<float> a(size_t(m) * k), b(size_t(k) * n), bias(size_t(m) * n);
    for (auto& v : a) v = rng.uniform(-1.f, 1.f);
    for (auto& v : b) v = rng.uniform(-1.f, 1.f);
    for (auto& v : bias) v = rng.uniform(-1.f, 1.f);
    const int lda = ta ? m : k, ldb = tb ? k : n;
    auto a_at = [&](int i0) { return ta ? a.data() + i0 : a.data() + size_t(i0) * lda; };
    auto b_at = [&](int j0) { return tb ? b.data() + size_t(j0) * ldb : b.data() + j0; };
    auto whole = [&] {
      std::vector<float> c = bias;
      f(ta, tb, m, n, k, 1.f, a.data(), lda, b.data(), ldb, 1.f, c.data(), n);
      return c;
    };
    const std::vector<float> one = whole();
    // Columns in uneven pieces (widths 1, 16, 37 and the rest pick different tiles).
    std::vector<float> by_cols = bias;
    const int col_cuts[] = {0, 1, 17, 54, n};
    for (int p = 0; p + 1 < 5; ++p) {
      const int j0 = col_cuts[p], j1 = col_cuts[p + 1];
      f(ta, tb, m, j1 - j0, k, 1.f, a.data(), lda, b_at(j0), ldb, 1.f, by_cols.data() + j0, n);
    }
    std::vector<float> by_rows = bias;
    const int row_cuts[] = {0, 3, 40, m};
    for (int p = 0; p + 1 < 4; ++p) {
      const int i0 = row_cuts[p], i1 = row_cuts[p + 1];
      f(ta, tb, i1 - i0, n, k, 1.f, a_at(i0), lda, b.data(), ldb, 1.f,
        by_rows.data() + size_t(i0) * n, n);
    }
    // Another shape in between grows and refills the pack buffers.
    std::vector<float> scratch(size_t(300) * 90);
    f(!ta, tb, 300, 90, k / 8, 1.f, a.data(), ta ? k / 8 : 300, b.data(), tb ? k / 8 : 90, 0.f,
      scratch.data(), 90);
    const std::vector<float> again = whole();
    EXPECT_EQ(0, std::memcmp(one.data(), by_cols.data(), one.size() * sizeof(float)))
        << "column pieces differ from one call";
    EXPECT_EQ(0, std::memcmp(one.data(), by_rows.data(), one.size() * sizeof(float)))
        << "row pieces differ from one call";
    EXPECT_EQ(0, std::memcmp(one.data(), again.data(), one.size() * sizeof(float)))
        << "a repeated call differs";
  }
}

}  // namespace hpmc::testing
