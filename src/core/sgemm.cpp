// sgemm.cpp — chooses between hpmc's AVX-512 SGEMM and OpenBLAS (sgemm.h).
#include "core/sgemm.h"

#include <cblas.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace hpmc {

namespace {

SgemmPath decide_path() {
  const char* env = std::getenv("HPMC_GEMM");
  const std::string want = env ? env : "";
  const bool ok = sgemm_avx512_supported();
  if (want.empty() || want == "auto") return ok ? SgemmPath::kAvx512 : SgemmPath::kOpenBlas;
  if (want == "openblas") return SgemmPath::kOpenBlas;
  if (want == "avx512") {
    if (!ok)
      throw RuntimeError(
          "HPMC_GEMM=avx512, but this CPU lacks AVX-512 (F, VL, BW, DQ); unset it to use OpenBLAS");
    return SgemmPath::kAvx512;
  }
  throw UsageError(str("HPMC_GEMM=", want, ": expected openblas, avx512 or auto"));
}

}  // namespace

bool sgemm_avx512_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  // libgcc's CPU model is filled by a constructor; initialise it here in case
  // this runs from another static initialiser first. The check includes the
  // OS's support for the ZMM register state (XGETBV).
  static const bool ok = (__builtin_cpu_init(), true) && __builtin_cpu_supports("avx512f") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

SgemmPath sgemm_path() {
  // Resolved once; configure_threads() calls this at start-up, so a bad
  // HPMC_GEMM is reported there and not from inside a parallel region.
  static const SgemmPath path = decide_path();
  return path;
}

const char* sgemm_path_name(SgemmPath p) {
  return p == SgemmPath::kAvx512 ? "hpmc avx512" : "openblas";
}

void sgemm_openblas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  if (sgemm_path() == SgemmPath::kAvx512)
    sgemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    sgemm_openblas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace hpmc
