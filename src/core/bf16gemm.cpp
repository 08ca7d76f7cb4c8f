// bf16gemm.cpp — chooses between hpmc's AVX512_BF16 GEMM and the portable
// path (bf16gemm.h), and is the portable path: operands rounded to bf16
// into float copies, then the float GEMM.
#include "core/bf16gemm.h"

#include <vector>

#include "core/bf16.h"
#include "core/sgemm.h"

namespace hpmc {

bool bf16gemm_avx512_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  // As sgemm_avx512_supported: libgcc's CPU model, with the OS's support for
  // the ZMM state.
  static const bool ok = (__builtin_cpu_init(), true) && sgemm_avx512_supported() &&
                         __builtin_cpu_supports("avx512bf16");
  return ok;
#else
  return false;
#endif
}

Bf16GemmPath bf16gemm_path() {
  static const Bf16GemmPath path =
      bf16gemm_avx512_supported() ? Bf16GemmPath::kAvx512Bf16 : Bf16GemmPath::kFallback;
  return path;
}

const char* bf16gemm_path_name(Bf16GemmPath p) {
  return p == Bf16GemmPath::kAvx512Bf16 ? "hpmc avx512_bf16" : "bf16-rounded operands, float GEMM";
}

namespace {

// The rows × cols matrix at x (leading dimension ld) rounded to bf16 into
// buf, packed (leading dimension cols).
const float* rounded_copy(const float* x, int ld, int rows, int cols, std::vector<float>& buf) {
  buf.resize(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r)
    round_bf16(x + size_t(r) * size_t(ld), buf.data() + size_t(r) * size_t(cols), size_t(cols));
  return buf.data();
}

thread_local std::vector<float> a_copy, b_copy;

}  // namespace

void bf16gemm_fallback(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // op(A) is M×K: stored as K rows of M when transposed, else M rows of K.
  const int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  const float* ar = rounded_copy(a, lda, trans_a ? k : m, a_cols, a_copy);
  const float* br = rounded_copy(b, ldb, trans_b ? n : k, b_cols, b_copy);
  sgemm(trans_a, trans_b, m, n, k, alpha, ar, a_cols, br, b_cols, beta, c, ldc);
}

void bf16gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (bf16gemm_path() == Bf16GemmPath::kAvx512Bf16)
    bf16gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    bf16gemm_fallback(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace hpmc
