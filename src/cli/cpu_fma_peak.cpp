// cpu_fma_peak.cpp — measure_cpu_fma_peak (bench.h): the FP32 rate of a loop
// that does nothing but independent fused multiply-adds on the widest vectors
// the CPU has, on every thread at once. A nominal clock times a datasheet
// width is a poor peak on a machine that boosts (or shares its cores); this is
// the rate a perfect GEMM inner loop could reach here and now. Likewise
// measure_cpu_bf16_peak with the bf16 GEMM's instruction: AMX-BF16 tile
// products (tdpbf16ps) on its amx path, else AVX512_BF16 dot products
// (vdpbf16ps).
#include <chrono>
#include <cstring>

#include "cli/bench.h"
#include "core/bf16gemm.h"
#include "core/threads.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hpmc {

namespace {

constexpr int kChains = 12;  // independent accumulators: more than FMA latency × units

#if defined(__x86_64__)
// The sum of kChains accumulators' 16 lanes (the loops' result).
__attribute__((target("avx512f"))) float sum_lanes(const __m512 (&acc)[kChains]) {
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  float v[16];
  _mm512_storeu_ps(v, s);
  float t = 0;
  for (float x : v) t += x;
  return t;
}

__attribute__((target("avx512f"))) float fma_avx512(long iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(float(k) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
  return sum_lanes(acc);
}

__attribute__((target("avx2,fma"))) float fma_avx2(long iters) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(float(k) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, a);
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  float v[8];
  _mm256_storeu_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

// kChains independent vdpbf16ps chains: each instruction adds two bf16
// products into each of 16 FP32 lanes.
__attribute__((target("avx512f,avx512bf16"))) float dp_avx512bf16(long iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(float(k) * 1e-3f);
  // bf16 pairs (1 + 2^-7, 1) against (2^-20, 2^-20): the sums stay finite.
  const __m512bh m = (__m512bh)_mm512_set1_epi32(0x3f803f81);
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x35803580);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], m, a);
  return sum_lanes(acc);
}
#endif

// One thread's loop at `width` floats per vector; returns a value that
// depends on every FMA (so none can be dropped).
float fma_loop(int width, long iters) {
#if defined(__x86_64__)
  if (width == 16) return fma_avx512(iters);
  if (width == 8) return fma_avx2(iters);
#endif
  float acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = float(k) * 1e-3f;
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * 0.9999999f + 1e-7f;
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

// The best rate of `loop` (returning a value that depends on all its work)
// on p.threads threads, `flops_per_iter` FLOPs per iteration and thread.
template <typename Loop>
double best_rate(const MeasuredPeak& p, double flops_per_iter, Loop loop) {
  using Clock = std::chrono::steady_clock;
  // Grow the loop until one run takes ~50 ms, then take the best of three.
  long iters = 1 << 14;
  double best = 0;
  volatile float sink = 0;
  for (int round = 0; round < 24 && best == 0; ++round) {
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = Clock::now();
      float part = 0;
#pragma omp parallel num_threads(p.threads) reduction(+ : part)
      part += loop(iters);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      sink = sink + part;
      if (s < 0.05) break;
      const double flops = double(p.threads) * double(iters) * flops_per_iter;
      if (flops / s > best) best = flops / s;
    }
    if (best == 0) iters *= 2;
  }
  return best;
}

}  // namespace

MeasuredPeak measure_cpu_fma_peak(int threads) {
  MeasuredPeak p;
  p.threads = threads > 0 ? threads : 1;
#if defined(__x86_64__)
  __builtin_cpu_init();
  p.width = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("fma") ? 8 : 1;
#else
  p.width = 1;
#endif
  p.isa = p.width == 16 ? "AVX-512" : p.width == 8 ? "AVX2 FMA" : "scalar";
  p.flops = best_rate(p, kChains * p.width * 2.0,
                      [&](long iters) { return fma_loop(p.width, iters); });
  return p;
}

MeasuredPeak measure_cpu_bf16_peak(int threads) {
  if (bf16gemm_path() == Bf16GemmPath::kAmx) {
    MeasuredPeak p;
    p.threads = threads > 0 ? threads : 1;
    p.width = 32;  // bf16 values a tile row
    p.isa = "AMX-BF16 tdpbf16ps";
    p.flops = best_rate(p, 4.0 * 16 * 16 * 32 * 2, bf16gemm_amx_peak_loop);
    return p;
  }
#if defined(__x86_64__)
  if (bf16gemm_avx512_supported()) {
    MeasuredPeak p;
    p.threads = threads > 0 ? threads : 1;
    p.width = 32;
    p.isa = "AVX512_BF16 vdpbf16ps";
    p.flops = best_rate(p, kChains * p.width * 2.0, dp_avx512bf16);
    return p;
  }
#endif
  return measure_cpu_fma_peak(threads);
}

}  // namespace hpmc
