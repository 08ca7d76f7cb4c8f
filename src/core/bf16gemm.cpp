// bf16gemm.cpp — chooses between hpmc's AMX and AVX512_BF16 GEMMs and the
// portable path (bf16gemm.h), and is the portable path: operands rounded to
// bf16 into float copies, then the float GEMM.
#include "core/bf16gemm.h"

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
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

namespace {

Bf16GemmPath decide_path() {
  const char* env = std::getenv("HPMC_BF16_GEMM");
  const std::string want = env ? env : "";
  if (want.empty() || want == "auto")
    return bf16gemm_amx_supported()      ? Bf16GemmPath::kAmx
           : bf16gemm_avx512_supported() ? Bf16GemmPath::kAvx512Bf16
                                         : Bf16GemmPath::kFallback;
  if (want == "fallback") return Bf16GemmPath::kFallback;
  if (want == "avx512_bf16") {
    if (!bf16gemm_avx512_supported())
      throw RuntimeError(
          "HPMC_BF16_GEMM=avx512_bf16, but this CPU lacks AVX512_BF16 (with F, VL, BW, DQ); "
          "unset it to use the fallback");
    return Bf16GemmPath::kAvx512Bf16;
  }
  if (want == "amx") {
    if (!bf16gemm_amx_supported())
      throw RuntimeError(str("HPMC_BF16_GEMM=amx, but ", bf16gemm_amx_missing(),
                             "; unset it to take the best path this machine has"));
    return Bf16GemmPath::kAmx;
  }
  throw UsageError(
      str("HPMC_BF16_GEMM=", want, ": expected amx, avx512_bf16, fallback or auto"));
}

}  // namespace

Bf16GemmPath bf16gemm_path() {
  // Resolved once; configure_threads() calls this at start-up, so a bad
  // HPMC_BF16_GEMM is reported there and not from inside a parallel region.
  static const Bf16GemmPath path = decide_path();
  return path;
}

const char* bf16gemm_path_name(Bf16GemmPath p) {
  switch (p) {
    case Bf16GemmPath::kAmx:
      return "hpmc amx_bf16";
    case Bf16GemmPath::kAvx512Bf16:
      return "hpmc avx512_bf16";
    default:
      return "bf16-rounded operands, float GEMM";
  }
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
  switch (bf16gemm_path()) {
    case Bf16GemmPath::kAmx:
      bf16gemm_amx(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      break;
    case Bf16GemmPath::kAvx512Bf16:
      bf16gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      break;
    default:
      bf16gemm_fallback(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// ---- a packed A ----------------------------------------------------------------

uint32_t* Bf16PackedA::start(Bf16GemmPath packer, bool transposed, int rows, int depth,
                              size_t count) {
  path = packer;
  trans = transposed;
  m = std::max(rows, 0);
  k = std::max(depth, 0);
  if (rows <= 0 || depth <= 0) return nullptr;
  if (count > capacity) {
    words.reset();
    capacity = 0;
    void* p = std::aligned_alloc(64, (count * sizeof(uint32_t) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    words.reset(static_cast<uint32_t*>(p));
    capacity = count;
  }
  return words.get();
}

bool bf16gemm_packs_a() { return bf16gemm_path() != Bf16GemmPath::kFallback; }

void bf16gemm_pack_a(bool trans_a, int m, int k, const float* a, int lda, Bf16PackedA& out) {
  switch (bf16gemm_path()) {
    case Bf16GemmPath::kAmx:
      bf16gemm_amx_pack_a(trans_a, m, k, a, lda, out);
      break;
    case Bf16GemmPath::kAvx512Bf16:
      bf16gemm_avx512_pack_a(trans_a, m, k, a, lda, out);
      break;
    default:
      throw RuntimeError("bf16gemm_pack_a: the fallback bf16 GEMM takes no packed A");
  }
}

size_t bf16gemm_packed_a_words(int m, int k) {
  switch (bf16gemm_path()) {
    case Bf16GemmPath::kAmx:
      return bf16gemm_amx_packed_a_words(m, k);
    case Bf16GemmPath::kAvx512Bf16:
      return bf16gemm_avx512_packed_a_words(m, k);
    default:
      return 0;
  }
}

void bf16gemm_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha, const float* b,
                       int ldb, float beta, float* c, int ldc) {
  switch (a.path) {
    case Bf16GemmPath::kAmx:
      bf16gemm_amx_packed_a(a, trans_b, n, alpha, b, ldb, beta, c, ldc);
      break;
    case Bf16GemmPath::kAvx512Bf16:
      bf16gemm_avx512_packed_a(a, trans_b, n, alpha, b, ldb, beta, c, ldc);
      break;
    default:
      throw RuntimeError("bf16gemm_packed_a: this Bf16PackedA was never packed");
  }
}


// ---- B through shifts and masks ------------------------------------------------------

bool bf16gemm_takes_shifted_b() { return bf16gemm_path() == Bf16GemmPath::kAvx512Bf16; }

void bf16gemm_shifted_b(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const float* a, int lda, const Bf16ShiftedB& b, float beta, float* c,
                        int ldc) {
  if (!bf16gemm_takes_shifted_b())
    throw RuntimeError(str("bf16gemm_shifted_b: the ", bf16gemm_path_name(bf16gemm_path()),
                           " path reads a whole B only"));
  bf16gemm_avx512_shifted_b(trans_a, trans_b, m, n, k, alpha, a, lda, b, beta, c, ldc);
}

void bf16gemm_packed_a_shifted_b(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                                 const Bf16ShiftedB& b, float beta, float* c, int ldc) {
  if (a.path != Bf16GemmPath::kAvx512Bf16)
    throw RuntimeError(str("bf16gemm_packed_a_shifted_b: A was packed for the ",
                           bf16gemm_path_name(a.path), " path, which reads a whole B only"));
  bf16gemm_avx512_packed_a_shifted_b(a, trans_b, n, alpha, b, beta, c, ldc);
}

}  // namespace hpmc
