// conv_variants.cu — hpmc_conv_bench: times every plan of the im2col family's
// GEMM path (tile configuration × split-K × GEMM_K order, implicit_conv.h) on
// the CIFAR autoencoder's convolutions conv1 … conv4 (3×3, pad 1; conv5 is
// thin and runs elsewhere), next to the plan the public functions choose, so
// that one run on the GPU shows what the heuristics in implicit_plan.h should
// pick. A development tool: not part of the trainer. Variant names are
// tile/splits/order: tile L, M, S, ThinN (classic engine) or WN, WM, WQ, WL
// (wide engine; tried where GEMM_K has at least 32 k-tiles); order chw
// (channel-major) or tap (tap-major GEMM_K; for the weight gradient, tap-major
// columns).
//
// It then times the upsample fold (implicit::upconv_*, conv2d_kernels.h) on
// conv4 of the autoencoder (up1 → conv4: 128 → 256 channels, 8×8 → 16×16):
// its three passes by plan, next to the unfolded conv4 on the upsampled map.
// TFLOP/s there count the multiply-adds the fold executes (4/9 of conv4's).
//
//   hpmc_conv_bench [batch=64] [reps=20] [only] [precision=fp32]
//     only: "fold" times the fold alone ("all" or "-": everything);
//     precision: fp32, tf32 or bf16 (training.precision: the tensor-core
//     stand-ins of the tiles in tf32 and bf16)
//
// Each figure: the median over 5 trials of `reps` back-to-back calls, timed
// with CUDA events after 3 warm-up calls, in ms per call, and TFLOP/s counting
// 2 FLOPs per multiply-add of the GEMM (padding and structural zeros not
// counted). The planned calls include their helper kernels (weight re-layout,
// split-K sums); "default" is the public function (backward_params with its
// bias gradient; conv1's runs on the few-input-channel kernel, not a plan).
// Inputs are uniform random in [−1, 1).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/precision.h"
#include "layers/conv_shape.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/implicit_conv.h"

namespace {

using namespace hpmc;
using namespace hpmc::gpu::implicit_detail;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

float* dev_random(size_t n, uint32_t seed) {
  std::vector<float> h(n);
  uint32_t s = seed * 2654435761u + 1u;
  for (float& v : h) {
    s = s * 1664525u + 1013904223u;
    v = float(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  float* d = nullptr;
  check(cudaMalloc(&d, std::max<size_t>(n, 1) * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

double time_ms(const std::function<void()>& f, int reps) {
  cudaEvent_t t0, t1;
  check(cudaEventCreate(&t0), "event");
  check(cudaEventCreate(&t1), "event");
  for (int i = 0; i < 3; ++i) f();
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> trials;
  for (int t = 0; t < 5; ++t) {
    check(cudaEventRecord(t0), "record");
    for (int i = 0; i < reps; ++i) f();
    check(cudaEventRecord(t1), "record");
    check(cudaEventSynchronize(t1), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, t0, t1), "elapsed");
    trials.push_back(double(ms) / reps);
  }
  check(cudaGetLastError(), "kernels");
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  std::sort(trials.begin(), trials.end());
  return trials[2];
}

const char* tile_name(Tile t) {
  switch (t) {
    case Tile::kL: return "L";
    case Tile::kM: return "M";
    case Tile::kS: return "S";
    case Tile::kThinN: return "ThinN";
    case Tile::kThinM: return "ThinM";
    case Tile::kWN: return "WN";
    case Tile::kWM: return "WM";
    case Tile::kWQ: return "WQ";
    case Tile::kWL: return "WL";
  }
  return "?";
}

struct Layer {
  const char* name;
  int C, HW, K;
};

struct Best {
  std::string what;
  double def_ms, best_ms;
  std::string best;
};

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 64;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  const Precision precision = argc > 4 ? parse_precision(argv[4]) : Precision::kFp32;
  const ScopedPrecision scope(precision);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("hpmc_conv_bench: %s, %d SMs, batch %d, %d calls per trial, precision %s\n",
              prop.name, prop.multiProcessorCount, batch, reps, precision_name(precision));

  const bool fold_only = argc > 3 && std::string(argv[3]) == "fold";
  const Layer layers[] = {{"conv1", 3, 32, 256},
                          {"conv2", 256, 16, 128},
                          {"conv3", 128, 8, 128},
                          {"conv4", 128, 16, 256}};
  const char* pass_names[] = {"fwd", "dgrad", "wgrad"};
  std::vector<Best> summary;
  for (const Layer& l : layers) {
    if (fold_only) break;
    const Conv2dShape s = make_conv2d_shape(batch, l.C, l.HW, l.HW, l.K, 3, 3, 1, 1);
    const size_t nx = size_t(batch) * s.in_sample(), ny = size_t(batch) * s.out_sample();
    float* x = dev_random(nx, 1);
    float* w = dev_random(s.weight_count(), 2);
    float* b = dev_random(size_t(s.K), 3);
    float* dy = dev_random(ny, 4);
    float* y = dev_random(ny, 5);
    float* dx = dev_random(nx, 6);
    float* dw = dev_random(s.weight_count(), 7);
    float* db = dev_random(size_t(s.K), 8);
    const double gflop = 2.0 * double(batch) * s.P * s.Q * s.K * s.C * 9 * 1e-9;

    for (int pi = 0; pi < 3; ++pi) {
      const ConvPass pass = ConvPass(pi);
      if (pass == ConvPass::kBackwardData && l.C == 3) continue;  // the first layer has none
      std::function<void()> def;
      if (pass == ConvPass::kForward) def = [&] { gpu::implicit::conv2d_forward(s, x, w, b, y); };
      else if (pass == ConvPass::kBackwardData)
        def = [&] { gpu::implicit::conv2d_backward_data(s, dy, w, dx); };
      else def = [&] { gpu::implicit::conv2d_backward_params(s, x, dy, dw, db); };
      const ConvPlan dp = plan_conv(s, pass);
      const double def_ms = time_ms(def, reps);
      // The default's route: the few-input-channel weight gradient has a kernel of
      // its own (implicit_thin_input_kernels.cuh), every other pass the plan below.
      char route[64];
      const bool bf16 = current_precision() == Precision::kBf16;
      if (pass == ConvPass::kWeightGrad &&
          thin_input_applies(s.C, s.K, s.R, s.S, s.stride, s.pad, bf16))
        std::snprintf(route, sizeof route, "thin-input");
      else
        std::snprintf(route, sizeof route, "%s/%d/%s", tile_name(dp.tile), dp.splits,
                      dp.tap ? "tap" : "chw");
      std::printf("%s %-5s  default %s  %.4f ms  %.1f TF\n", l.name, pass_names[pi], route,
                  def_ms, gflop / def_ms);
      Best best{std::string(l.name) + " " + pass_names[pi], def_ms, 1e30, ""};

      std::vector<int> split_list;
      if (pass == ConvPass::kWeightGrad) {
        for (int sp : {1, 4, 7, 14, 28, 56}) split_list.push_back(sp);
        if (std::find(split_list.begin(), split_list.end(), dp.splits) == split_list.end())
          split_list.push_back(dp.splits);
      } else {
        split_list = {1, 2, 4};
      }
      std::vector<Tile> tile_list = {Tile::kL, Tile::kM, Tile::kS};
      if (pass == ConvPass::kWeightGrad && s.C * 9 <= 32) tile_list.push_back(Tile::kThinN);
      else if (conv_ktiles(s, pass) >= 32)  // the wide tiles are for long reductions
        for (Tile t : {Tile::kWN, Tile::kWM, Tile::kWQ, Tile::kWL}) tile_list.push_back(t);
      for (Tile t : tile_list)
        for (int sp : split_list)
          for (bool tap : {false, true}) {
            if (tap && !(pass == ConvPass::kForward        ? tap_major_forward(s.C, s.K)
                         : pass == ConvPass::kBackwardData ? tap_major_backward_data(1, s.C, s.K)
                                                           : tap_major_weight_grad(s.C, t)))
              continue;
            const ConvPlan p = make_conv_plan(s, pass, t, sp, tap);
            std::function<void()> f;
            if (pass == ConvPass::kForward)
              f = [&] { conv_forward_planned(s, p, x, w, b, y); };
            else if (pass == ConvPass::kBackwardData)
              f = [&] { conv_backward_data_planned(s, p, dy, w, dx); };
            else f = [&] { conv_weight_grad_planned(s, p, x, dy, dw); };
            const double ms = time_ms(f, reps);
            char name[64];
            std::snprintf(name, sizeof name, "%s/%d/%s", tile_name(t), p.splits,
                          tap ? "tap" : "chw");
            std::printf("   %-12s %.4f ms  %.1f TF\n", name, ms, gflop / ms);
            if (ms < best.best_ms) best.best_ms = ms, best.best = name;
          }
      summary.push_back(best);
    }
    for (float* p : {x, w, b, dy, y, dx, dw, db}) cudaFree(p);
  }
  {  // the upsample fold on conv4
    const Layer& l = layers[3];
    const Conv2dShape s = make_conv2d_shape(batch, l.C, l.HW, l.HW, l.K, 3, 3, 1, 1);
    const size_t nlow = size_t(batch) * s.in_sample() / 4, ny = size_t(batch) * s.out_sample();
    float* x = dev_random(nlow, 11);
    float* w = dev_random(s.weight_count(), 12);
    float* b = dev_random(size_t(s.K), 13);
    float* dy = dev_random(ny, 14);
    float* y = dev_random(ny, 15);
    float* dx = dev_random(nlow, 16);
    float* dw = dev_random(s.weight_count(), 17);
    float* db = dev_random(size_t(s.K), 18);
    const double gflop = 2.0 * double(batch) * s.P * s.Q * s.K * s.C * 4 * 1e-9;
    for (int pi = 0; pi < 3; ++pi) {
      const ConvPass pass = ConvPass(pi);
      std::function<void()> def;
      if (pass == ConvPass::kForward)
        def = [&] { gpu::implicit::upconv_forward(s, x, w, b, y, Activation::relu()); };
      else if (pass == ConvPass::kBackwardData)
        def = [&] { gpu::implicit::upconv_backward_data(s, dy, w, x, dx); };
      else def = [&] { gpu::implicit::upconv_backward_params(s, x, dy, dw, db); };
      const ConvPlan dp = plan_upconv(s, pass);
      const double def_ms = time_ms(def, reps);
      std::printf("conv4-fold %-5s  default %s/%d  %.4f ms  %.1f TF\n", pass_names[pi],
                  tile_name(dp.tile), dp.splits, def_ms, gflop / def_ms);
      Best best{std::string("conv4-fold ") + pass_names[pi], def_ms, 1e30, ""};
      for (Tile t : {Tile::kL, Tile::kM, Tile::kS, Tile::kWL, Tile::kWQ, Tile::kWN, Tile::kWM})
        for (int sp : {1, 2, 4, 8, 16}) {
          const ConvPlan p = make_upconv_plan(s, pass, t, sp);
          std::function<void()> f;
          if (pass == ConvPass::kForward)
            f = [&] { upconv_forward_planned(s, p, x, w, b, y, Activation::relu()); };
          else if (pass == ConvPass::kBackwardData)
            f = [&] { upconv_backward_data_planned(s, p, dy, w, x, dx); };
          else f = [&] { upconv_weight_grad_planned(s, p, x, dy, dw); };
          const double ms = time_ms(f, reps);
          char name[64];
          std::snprintf(name, sizeof name, "%s/%d", tile_name(t), p.splits);
          std::printf("   %-12s %.4f ms  %.1f TF\n", name, ms, gflop / ms);
          if (ms < best.best_ms) best.best_ms = ms, best.best = name;
        }
      summary.push_back(best);
    }
    for (float* p : {x, w, b, dy, y, dx, dw, db}) cudaFree(p);
  }
  std::printf("\nsummary (ms per call; default = the public function)\n");
  double tot_def = 0, tot_best = 0;
  for (const Best& b : summary) {
    std::printf("  %-12s default %.4f   best %.4f (%s)\n", b.what.c_str(), b.def_ms, b.best_ms,
                b.best.c_str());
    tot_def += b.def_ms;
    tot_best += b.best_ms;
  }
  std::printf("  %-12s default %.4f   best %.4f\n", "total", tot_def, tot_best);
  return 0;
}
