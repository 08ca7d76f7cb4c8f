// The conv_transpose2d LAYER on the GPU (gpu::ConvTranspose2dGPU, built
// through the registry for --impl naive, tiled and im2col) against the CPU
// layer on fresh random inputs over odd shapes: forward, input gradient, and
// parameter gradients accumulated over two backward calls; its metadata; and
// the tiny autoencoder of test_conv_transpose.cpp (conv2d stride 2 down,
// conv_transpose2d stride 2 up) trained on each impl, tracking the CPU run.
// The kernels themselves are tested in test_gpu_conv_transpose.cpp.
//
// Built with or without CUDA; every test starts with HPMC_REQUIRE_GPU() and
// skips with its reason where no GPU is usable.
//
// Error bound: both sides are fp32 sums of the same terms in different orders,
// each within ~√n·2^-24 of the exact value relative to ‖ref‖∞ for these random
// zero-mean data (test_gpu_conv.cpp explains the bound); 2e-5·‖cpu‖∞ is twice
// the bound the kernel tests hold each side to against double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "conv_transpose_reference.h"
#include "core/error.h"
#include "core/rng.h"
#include "gpu_testing.h"
#include "model/config.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::CtCase;
using testing::no_bias;

constexpr double kTol = 2e-5;

std::string keys_of(const CtCase& cc) {
  return str("{out_channels: ", cc.out, ", kernel: ", cc.kernel, ", stride: ", cc.stride,
             ", padding: ", cc.pad, ", output_padding: ", cc.op,
             ", bias: ", cc.bias ? "true" : "false", "}");
}

Tensor tensor_on(Device d, const Shape& s, const std::vector<float>& v) {
  Tensor h = Tensor::empty(s);
  std::copy(v.begin(), v.end(), h.data<float>());
  return d == Device::kCPU ? h : testing::to_gpu(h);
}

std::vector<float> host_values(const Tensor& t) {
  Tensor h = t.device() == Device::kCPU ? t : testing::to_cpu(t);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

// The layer for `impl` with the given parameters, gradients zeroed, run
// forward then backward twice (gradients accumulate; dx is overwritten).
struct LayerRun {
  std::vector<float> y, dx, dw, db;
};

LayerRun run_layer(const CtCase& cc, Impl impl, const std::vector<float>& x,
                   const std::vector<float>& w, const std::vector<float>& b,
                   const std::vector<float>& dy) {
  const Device dev = impl == Impl::kCpu ? Device::kCPU : Device::kGPU;
  LayerPtr l = make_layer("conv_transpose2d", keys_of(cc), impl, cc.in_shape(), "up");
  Tensor wt = tensor_on(dev, Shape(1, int(w.size()), 1, 1), w);
  Tensor gw = Tensor::zeros(wt.shape(), DType::kF32, dev);
  std::vector<float*> params{wt.data<float>()}, grads{gw.data<float>()};
  Tensor bt, gb;
  if (cc.bias) {
    bt = tensor_on(dev, Shape(1, int(b.size()), 1, 1), b);
    gb = Tensor::zeros(bt.shape(), DType::kF32, dev);
    params.push_back(bt.data<float>());
    grads.push_back(gb.data<float>());
  }
  l->bind(params, grads);
  const Tensor xt = tensor_on(dev, cc.in_shape(), x);
  Tensor y = Tensor::empty(l->output_shape(xt.shape()), DType::kF32, dev);
  l->forward(xt, y);
  const Tensor dyt = tensor_on(dev, y.shape(), dy);
  Tensor dx = tensor_on(dev, xt.shape(), std::vector<float>(x.size(), NAN));
  l->backward(xt, y, dyt, &dx);
  l->backward(xt, y, dyt, &dx);
  LayerRun r{host_values(y), host_values(dx), host_values(gw), {}};
  if (cc.bias) r.db = host_values(gb);
  return r;
}

// ‖a − ref‖∞ / max(‖ref‖∞, 1e-30); infinity for a NaN or a size mismatch.
double rel_inf_error(const std::vector<float>& a, const std::vector<float>& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(ref[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - double(ref[i])));
    norm = std::max(norm, std::fabs(double(ref[i])));
  }
  return diff / std::max(norm, 1e-30);
}

class GpuConvTransposeLayer : public ::testing::TestWithParam<CtCase> {};

TEST_P(GpuConvTransposeLayer, EveryImplMatchesTheCpuLayer) {
  HPMC_REQUIRE_GPU();
  const CtCase& cc = GetParam();
  Rng rng(5100 + uint64_t(cc.n * 7 + cc.in * 31 + cc.out * 131 + cc.h * 17 + cc.stride));
  const float bound = 1.f / std::sqrt(float(cc.out * cc.kernel * cc.kernel));
  std::vector<float> x(cc.x_count()), w(cc.w_count()), b(cc.bias ? size_t(cc.out) : 0),
      dy(cc.y_count());
  for (auto& v : x) v = rng.uniform(-1.f, 1.f);
  for (auto& v : w) v = rng.uniform(-bound, bound);
  for (auto& v : b) v = rng.uniform(-bound, bound);
  for (auto& v : dy) v = rng.uniform(-1.f, 1.f);
  const LayerRun cpu = run_layer(cc, Impl::kCpu, x, w, b, dy);
  for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(impl_name(impl));
    const LayerRun gpu = run_layer(cc, impl, x, w, b, dy);
    EXPECT_LE(rel_inf_error(gpu.y, cpu.y), kTol) << "y";
    EXPECT_LE(rel_inf_error(gpu.dx, cpu.dx), kTol) << "dx";
    EXPECT_LE(rel_inf_error(gpu.dw, cpu.dw), kTol) << "dw (two backward calls)";
    if (cc.bias) {
      EXPECT_LE(rel_inf_error(gpu.db, cpu.db), kTol) << "db (two backward calls)";
    }
  }
}

// {n, in, h, w, out, kernel, stride, pad, op}: batch 1, 1/3/5 channels, strides
// 2 and 3 with output_padding, odd sizes, a decoder-sized layer.
INSTANTIATE_TEST_SUITE_P(
    GpuConvTransposeLayerShapes, GpuConvTransposeLayer,
    ::testing::Values(CtCase{1, 1, 5, 7, 1, 3, 2, 1, 1}, CtCase{1, 3, 5, 7, 5, 3, 2, 1, 1},
                      CtCase{3, 5, 7, 5, 3, 4, 2, 1, 0}, CtCase{2, 5, 3, 4, 3, 5, 3, 2, 2},
                      CtCase{2, 3, 9, 11, 5, 3, 1, 1, 0}, CtCase{1, 3, 5, 7, 5, 1, 2, 0, 1},
                      CtCase{8, 16, 16, 16, 3, 4, 2, 1, 0},
                      no_bias(CtCase{2, 3, 5, 7, 5, 3, 3, 1, 2})),
    [](const ::testing::TestParamInfo<CtCase>& p) { return p.param.name(); });

TEST(GpuConvTransposeLayerMeta, ImplFollowsTheFamilyAndTheSpecIsShared) {
  HPMC_REQUIRE_GPU();
  const char* names[] = {"naive", "tiled", "im2col"};
  const Impl impls[] = {Impl::kNaive, Impl::kTiled, Impl::kIm2col};
  for (int i = 0; i < 3; ++i) {
    const char* keys = "{out_channels: 4, kernel: 3, stride: 2, padding: 1, output_padding: 1}";
    LayerPtr l = make_layer("conv_transpose2d", keys, impls[i], Shape(1, 3, 5, 7));
    EXPECT_STREQ(l->type(), "conv_transpose2d");
    EXPECT_EQ(l->kind(), LayerKind::kConvTranspose2d);
    EXPECT_STREQ(l->impl(), names[i]);
    EXPECT_EQ(l->device(), Device::kGPU);
    EXPECT_EQ(l->describe(), "3x3 s2 p1 op1");
    EXPECT_EQ(l->param_count(), size_t(3 * 4 * 9 + 4));
    EXPECT_EQ(l->output_shape(Shape(2, 3, 5, 7)), Shape(2, 4, 10, 14));
    EXPECT_THROW(l->output_shape(Shape(1, 2, 5, 7)), ShapeError);
  }
}

// The autoencoder of ConvTranspose2dModel (test_conv_transpose.cpp), trained
// for 2 epochs of 800 images (100 steps) on the CPU and on each GPU impl from
// the same weights and data order: the loss curves must agree to within the
// fp32 drift of different summation orders (test_gpu_train.cpp's bound).
const char* kTinyAe = R"(name: ct_ae
data: {format: mnist}
model:
  loss: mse
  features: down
  layers:
    - {name: down, type: conv2d, out_channels: 8, kernel: 3, stride: 2, padding: 1}
    - {name: relu1, type: relu}
    - {name: up, type: conv_transpose2d, out_channels: 1, kernel: 3, stride: 2, padding: 1,
       output_padding: 1}
training: {epochs: 2, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 2}
)";

std::vector<EpochResult> train_on(Impl impl, const Dataset& tr, const Dataset& te) {
  const Config cfg = parse_config(kTinyAe, "ct_ae.yaml");
  auto model = Model::build(cfg, impl, Shape(1, 1, 28, 28), 10);
  model->params().init(cfg.training.seed);
  Trainer t(*model, cfg.training);
  t.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  return t.fit(tr, te, log);
}

TEST(GpuConvTransposeTrain, TinyAutoencoderTracksTheCpu) {
  HPMC_REQUIRE_GPU();
  const Dataset tr = testing::synthetic_blobs(800, 3), te = testing::synthetic_blobs(320, 4);
  const auto cpu = train_on(Impl::kCpu, tr, te);
  ASSERT_EQ(cpu.size(), 2u);
  EXPECT_LT(cpu[1].train_loss, cpu[0].train_loss);
  auto rel = [](double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); };
  for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(impl_name(impl));
    const auto gpu = train_on(impl, tr, te);
    ASSERT_EQ(gpu.size(), cpu.size());
    for (size_t e = 0; e < cpu.size(); ++e) {
      EXPECT_LE(rel(gpu[e].train_loss, cpu[e].train_loss), 5e-3)
          << "epoch " << e + 1 << ": " << gpu[e].train_loss << " vs cpu " << cpu[e].train_loss;
      EXPECT_LE(rel(gpu[e].test.loss, cpu[e].test.loss), 5e-3)
          << "epoch " << e + 1 << ": " << gpu[e].test.loss << " vs cpu " << cpu[e].test.loss;
    }
  }
}

}  // namespace
}  // namespace hpmc
