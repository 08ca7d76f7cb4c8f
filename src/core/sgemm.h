// sgemm.h — single-precision GEMM: hpmc's own AVX-512 kernel, or OpenBLAS.
//
// C[M×N] = alpha · op(A)[M×K] · op(B)[K×N] + beta · C, every matrix row-major
// with its leading dimension (lda/ldb/ldc ≥ its row length); op(X) is X or
// X^T. With beta == 0, C is only written, never read (it may hold NaNs).
//
// Two paths, chosen once per process:
//   * avx512: hpmc's packed, cache-blocked kernel (sgemm_avx512.cpp). Taken
//     when the CPU has AVX-512F/VL/BW/DQ, whatever -march the binary was
//     built with: that file carries its own target attributes.
//   * openblas: cblas_sgemm. Taken on other CPUs, or when the environment
//     has HPMC_GEMM=openblas (A/B benchmarks, tests).
// Each call runs on the calling thread only; hpmc threads around it.
//
// Determinism: in the avx512 path each element of C is summed over k in the
// same order whatever M, N, the leading dimensions or the tile it falls in;
// the order depends on K only (K is cut into near-equal blocks, each summed
// in registers and then added to C). Splitting a product by rows or columns
// over several calls thus gives the same bits as one call.
#pragma once

namespace hpmc {

enum class SgemmPath { kAvx512, kOpenBlas };

// The path sgemm() takes (decided on first use; HPMC_GEMM=openblas|avx512|auto).
SgemmPath sgemm_path();
const char* sgemm_path_name(SgemmPath p);
// Whether this CPU can run the avx512 path.
bool sgemm_avx512_supported();

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

// Each path directly, for tests and benchmarks. sgemm_avx512 requires
// sgemm_avx512_supported().
void sgemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc);
void sgemm_openblas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace hpmc
