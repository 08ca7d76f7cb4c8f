// gemm_bench.cu — hpmc_gemm_bench: times the GPU GEMMs of the Linear layer's
// products, the implicit engine (implicit_gemm_core.cuh, HPMC_GEMM_LARGE=0)
// against the large-GEMM engine (gemm_large.h) in both of its tile
// configurations, so that one run on the GPU shows the rates and which
// configuration to ship; then the tensor-core engine (gemm_tc.h) in tf32 and
// bf16 on the same products. A development tool: not part of the trainer.
//
// Shapes: square C = A·B at m = n = k ∈ {1024, 2048, 4096, 8192}, then a
// 4096→4096 Linear layer at batch 256, 1024 and 4096, each of its products:
//   fwd    y  = x·Wᵀ      (m = batch, n = 4096, k = 4096; B transposed)
//   wgrad  dW += dyᵀ·x    (m = 4096, n = 4096, k = batch; A transposed, accumulate)
//   dgrad  dx = dy·W      (m = batch, n = 4096, k = 4096)
//
//   hpmc_gemm_bench [max_square=8192] [trials=5]
//
// Each figure: the median of `trials` timings of back-to-back calls (as many
// as take ≥ ~20 ms, at least 1), with CUDA events, after 2 warm-up calls;
// TFLOP/s count 2·m·n·k; "peak" is SMs × 128 lanes × 2 × the clock the
// device reports (as hpmc bench computes it). "err" is max |C − ref| /
// max |ref| over 256 sampled elements of C against a double-precision
// reference computed on the host (for wgrad, of the accumulated result).
// Inputs are uniform random in [−1, 1) (never zeros); C is poisoned with
// NaN before the checked call (all but wgrad, which accumulates onto random
// values), and any NaN left fails the check. The last lines are a table.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/gemm_large.h"
#include "layers/gpu/gemm_tc.h"

namespace {

using namespace hpmc;
namespace gl = hpmc::gpu::gemm_large;
namespace tc = hpmc::gpu::gemm_tc;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::vector<float> host_random(size_t n, uint32_t seed) {
  std::vector<float> h(n);
  uint32_t s = seed * 2654435761u + 1u;
  for (float& v : h) {
    s = s * 1664525u + 1013904223u;
    v = float(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return h;
}

float* to_device(const std::vector<float>& h) {
  float* d = nullptr;
  check(cudaMalloc(&d, std::max<size_t>(h.size(), 1) * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), "copy in");
  return d;
}

struct Product {
  std::string name;
  bool ta, tb;
  int m, n, k;
  bool acc;
};

// One product's operands on host and device (C re-set before each check).
struct Operands {
  Product p;
  int lda, ldb, ldc;
  std::vector<float> a, b, c0;
  float *da = nullptr, *db = nullptr, *dc = nullptr;

  explicit Operands(const Product& pr, uint32_t seed) : p(pr) {
    lda = p.ta ? p.m : p.k;
    ldb = p.tb ? p.k : p.n;
    ldc = p.n;
    a = host_random(size_t(p.ta ? p.k : p.m) * lda, seed);
    b = host_random(size_t(p.tb ? p.n : p.k) * ldb, seed + 1);
    c0 = host_random(size_t(p.m) * ldc, seed + 2);
    da = to_device(a);
    db = to_device(b);
    dc = to_device(c0);
  }
  ~Operands() {
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
  }
  double a_at(int i, int l) const { return p.ta ? a[size_t(l) * lda + i] : a[size_t(i) * lda + l]; }
  double b_at(int l, int j) const { return p.tb ? b[size_t(j) * ldb + l] : b[size_t(l) * ldb + j]; }

  // C as the checked call starts it: c0 when accumulating, else NaN.
  void reset_c() {
    std::vector<float> c = c0;
    if (!p.acc) std::fill(c.begin(), c.end(), std::nanf(""));
    check(cudaMemcpy(dc, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice), "reset C");
  }

  // max |C − ref| / max |ref| over 256 sampled elements (inf if NaN or not written).
  double sampled_error() const {
    std::vector<float> c(size_t(p.m) * ldc);
    check(cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy out");
    double diff = 0, norm = 0;
    uint32_t s = 12345;
    for (int t = 0; t < 256; ++t) {
      s = s * 1664525u + 1013904223u;
      const int i = int((s >> 8) % uint32_t(p.m));
      s = s * 1664525u + 1013904223u;
      const int j = int((s >> 8) % uint32_t(p.n));
      double ref = p.acc ? double(c0[size_t(i) * ldc + j]) : 0.0;
      for (int l = 0; l < p.k; ++l) ref += a_at(i, l) * b_at(l, j);
      const float got = c[size_t(i) * ldc + j];
      if (!std::isfinite(got)) return INFINITY;
      diff = std::max(diff, std::fabs(double(got) - ref));
      norm = std::max(norm, std::fabs(ref));
    }
    return diff / std::max(norm, 1e-30);
  }
};

using Call = std::function<void()>;

// Median ms per call over `trials` timings.
double time_ms(const Call& call, double flops, int trials) {
  for (int w = 0; w < 2; ++w) call();
  check(cudaDeviceSynchronize(), "warm-up");
  const int reps = int(std::max(1.0, std::min(50.0, 2e-2 * 40e12 / std::max(flops, 1.0))));
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  std::vector<double> ms;
  for (int t = 0; t < trials; ++t) {
    check(cudaEventRecord(e0), "record");
    for (int r = 0; r < reps; ++r) call();
    check(cudaEventRecord(e1), "record");
    check(cudaEventSynchronize(e1), "sync");
    float x = 0;
    check(cudaEventElapsedTime(&x, e0, e1), "elapsed");
    ms.push_back(double(x) / reps);
  }
  check(cudaGetLastError(), "launches");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Row {
  std::string shape, product, kernel;
  double ms, tflops, peak_frac, err;
  int splits;
};

}  // namespace

int run(int argc, char** argv) {
  const int max_square = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int trials = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const gpu::DevicePeak peak = gpu::device_peak();
  std::printf("device: %s, %d SMs, %.3f GHz, FP32 peak %.1f TFLOP/s\n", peak.name.c_str(),
              peak.sms, peak.clock_ghz, peak.fp32_flops * 1e-12);

  std::vector<std::pair<std::string, Product>> work;
  for (int s : {1024, 2048, 4096, 8192})
    if (s <= max_square) work.push_back({str("square ", s), {"C=A·B", false, false, s, s, s, false}});
  for (int batch : {256, 1024, 4096}) {
    const int f = 4096;
    const std::string shape = str("linear 4096-4096 b", batch);
    work.push_back({shape, {"fwd", false, true, batch, f, f, false}});
    work.push_back({shape, {"wgrad", true, false, f, f, batch, true}});
    work.push_back({shape, {"dgrad", false, false, batch, f, f, false}});
  }

  std::vector<Row> rows;
  uint32_t seed = 1;
  for (const auto& item : work) {
    const std::string& shape = item.first;
    const Product& pr = item.second;
    Operands o(pr, seed += 7);
    const double flops = 2.0 * pr.m * pr.n * pr.k;
    struct Kernel {
      std::string name;
      Call call;
      int splits;
    };
    const int sp8 = gl::splits_for(pr.m, pr.n, pr.k, 8), sp16 = gl::splits_for(pr.m, pr.n, pr.k, 16);
    const std::vector<Kernel> kernels = {
        {"implicit (old)",
         [&] {
           setenv("HPMC_GEMM_LARGE", "0", 1);
           gpu::implicit::gemm(pr.ta, pr.tb, pr.m, pr.n, pr.k, o.da, o.lda, o.db, o.ldb, o.dc,
                               o.ldc, pr.acc);
         },
         1},
        {"large K8",
         [&] {
           gl::gemm(pr.ta, pr.tb, pr.m, pr.n, pr.k, o.da, o.lda, o.db, o.ldb, o.dc, o.ldc, pr.acc,
                    gl::Variant::kK8);
         },
         sp8},
        {"large K16",
         [&] {
           gl::gemm(pr.ta, pr.tb, pr.m, pr.n, pr.k, o.da, o.lda, o.db, o.ldb, o.dc, o.ldc, pr.acc,
                    gl::Variant::kK16);
         },
         sp16},
    };
    for (const Kernel& kn : kernels) {
      o.reset_c();
      kn.call();
      check(cudaDeviceSynchronize(), kn.name.c_str());
      const double err = o.sampled_error();
      const double ms = time_ms(kn.call, flops, trials);
      const double tf = flops / (ms * 1e-3) * 1e-12;
      rows.push_back({shape, pr.name, kn.name, ms, tf, flops / (ms * 1e-3) / peak.fp32_flops, err,
                      kn.splits});
      std::printf("%-26s %-6s %-15s %9.3f ms %7.2f TFLOP/s %5.1f%% of peak  err %.2e  splits %d\n",
                  shape.c_str(), pr.name.c_str(), kn.name.c_str(), ms, tf,
                  100 * rows.back().peak_frac, err, kn.splits);
      std::fflush(stdout);
    }
  }
  unsetenv("HPMC_GEMM_LARGE");

  // The table: per product, the old kernel, the two new ones, and new/old.
  std::printf("\nsummary (%s; ms per call, %% of the FP32 peak %.1f TFLOP/s; err: sampled, vs double)\n",
              peak.name.c_str(), peak.fp32_flops * 1e-12);
  std::printf("| shape | product | old ms | old %% | K8 ms | K8 %% | K16 ms | K16 %% | old / best new | max err |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool bad = false;
  for (size_t i = 0; i + 2 < rows.size(); i += 3) {
    const Row &o = rows[i], &k8 = rows[i + 1], &k16 = rows[i + 2];
    const double err = std::max({o.err, k8.err, k16.err});
    bad = bad || !(err < 1e-5);
    std::printf("| %s | %s | %.3f | %.1f | %.3f | %.1f | %.3f | %.1f | %.2fx | %.1e |\n",
                o.shape.c_str(), o.product.c_str(), o.ms, 100 * o.peak_frac, k8.ms,
                100 * k8.peak_frac, k16.ms, 100 * k16.peak_frac,
                o.ms / std::min(k8.ms, k16.ms), err);
  }
  if (bad) std::printf("ERROR: a sampled relative error is not below 1e-5 (or NaN)\n");

  // The tensor-core engine (gemm_tc.h, training.precision tf32 and bf16) on the
  // same products: TFLOP/s against the datasheet's dense rates of an H100/H200
  // SXM (tf32 about 495, bf16 about 990), and the sampled error against the
  // unrounded double product (tf32 near 1e-3, bf16 near 1e-2 of max |ref| are
  // the precisions' own; above 5e-3 and 3e-2 is flagged).
  std::printf("\ntensor cores (%s; ms per call; err: sampled, vs the FP32 operands in double)\n",
              peak.name.c_str());
  std::printf("| shape | product | tf32 ms | tf32 TFLOP/s | bf16 ms | bf16 TFLOP/s | tf32 err | bf16 err |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  bool tc_bad = false;
  seed = 1;
  for (const auto& item : work) {
    const Product& pr = item.second;
    Operands o(pr, seed += 7);
    const double flops = 2.0 * pr.m * pr.n * pr.k;
    double ms[2], err[2];
    for (int v = 0; v < 2; ++v) {
      const tc::Operands kind = v == 0 ? tc::Operands::kTf32 : tc::Operands::kBf16;
      const Call call = [&] {
        tc::gemm(kind, pr.ta, pr.tb, pr.m, pr.n, pr.k, o.da, o.lda, o.db, o.ldb, o.dc, o.ldc,
                 pr.acc);
      };
      o.reset_c();
      call();
      check(cudaDeviceSynchronize(), tc::operands_name(kind));
      err[v] = o.sampled_error();
      ms[v] = time_ms(call, flops, trials);
    }
    tc_bad = tc_bad || !(err[0] < 5e-3) || !(err[1] < 3e-2);
    std::printf("| %s | %s | %.3f | %.1f | %.3f | %.1f | %.1e | %.1e |\n", item.first.c_str(),
                pr.name.c_str(), ms[0], flops / (ms[0] * 1e-3) * 1e-12, ms[1],
                flops / (ms[1] * 1e-3) * 1e-12, err[0], err[1]);
    std::fflush(stdout);
  }
  if (tc_bad) std::printf("ERROR: a tensor-core error above its precision's bound (or NaN)\n");
  return bad || tc_bad ? 1 : 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hpmc_gemm_bench: %s\n", e.what());
    return 1;
  }
}
