// blas.h — row-major GEMM for float and double.
//
// C[M×N] = alpha · op(A) · op(B) + beta · C, all row-major with leading
// dimensions lda/ldb/ldc. Float goes to hpmc's own SGEMM (sgemm.h: an
// AVX-512 kernel where the CPU has it, else OpenBLAS); double goes to
// OpenBLAS and lets tests run the very same layer code in double precision
// for finite-difference gradient checks. The forms with a Precision run a
// float product in the model's precision (core/precision.h): fp32 through
// sgemm, bf16 through bf16gemm (operands rounded to bf16, FP32 sums); a
// double product runs fp32 only.
#pragma once

#include <cblas.h>

#include "core/bf16gemm.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/sgemm.h"

namespace hpmc {

inline void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a,
                 int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm(Precision p, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (p == Precision::kBf16) {
    bf16gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  HPMC_CHECK(p == Precision::kFp32, "the CPU GEMM runs fp32 or bf16, not ", precision_name(p));
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm(Precision p, bool trans_a, bool trans_b, int m, int n, int k, double alpha,
                 const double* a, int lda, const double* b, int ldb, double beta, double* c,
                 int ldc) {
  HPMC_CHECK(p == Precision::kFp32, "the double GEMM runs fp32 only, not ", precision_name(p));
  gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace hpmc
