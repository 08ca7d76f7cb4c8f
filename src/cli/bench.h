// bench.h — the pieces of `hpmc bench` worth testing on their own: the CPU
// peak estimate and the summary statistics of the timed runs.
#pragma once

#include <string>
#include <vector>

namespace hpmc {

// An FP32 peak estimate for `cores` CPU cores: cores × 2 FMA units × SIMD
// width in floats (16 with AVX-512F, 8 with AVX2 and FMA, 4 otherwise) × 2
// FLOPs per FMA × the nominal clock. The clock is the "@ X.XXGHz" of the
// model name when it has one, else the first "cpu MHz". `cpuinfo` is the
// text of /proc/cpuinfo. flops is 0 when no clock could be found.
struct CpuPeak {
  std::string model;  // "model name", or "unknown CPU"
  std::string simd;   // "AVX-512F", "AVX2+FMA" or "SSE/NEON"
  int cores = 0;
  int fma_units = 2;
  int simd_floats = 4;
  double ghz = 0;
  double flops = 0;  // FLOP/s
};
CpuPeak estimate_cpu_peak(const std::string& cpuinfo, int cores);

// The measured FP32 rate of `threads` threads doing only independent FMAs on
// the widest vectors the CPU supports (AVX-512, AVX2 or scalar), the best of
// three runs of about 50 ms: the ceiling hpmc bench holds the CPU against.
struct MeasuredPeak {
  int threads = 1;
  int width = 1;     // floats per vector (bf16 values for the bf16 peak)
  std::string isa;   // "AVX-512", "AVX2 FMA", "scalar" or "AVX512_BF16 vdpbf16ps"
  double flops = 0;  // FLOP/s
};
MeasuredPeak measure_cpu_fma_peak(int threads);
// The same for training.precision: bf16, in the instruction of the bf16
// GEMM's path (bf16gemm.h): on amx, independent TDPBF16PS tile products
// (bf16gemm_amx_peak_loop); on avx512_bf16, independent vdpbf16ps (32 bf16
// products a vector, each a multiply-add); elsewhere the bf16 GEMM runs on
// FP32 FMAs (fallback) and this is measure_cpu_fma_peak.
MeasuredPeak measure_cpu_bf16_peak(int threads);

// Median (the mean of the middle two for an even count), min and max.
struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread(std::vector<double> v);

}  // namespace hpmc
