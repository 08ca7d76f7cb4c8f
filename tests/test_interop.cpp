// test_interop.cpp — an hpmc checkpoint is a PyTorch state dict: the file in
// tests/data/interop.safetensors, written by hpmc for a model with batch norm
// (running statistics), PReLU, dropout and a transposed convolution, loads
// into the equivalent PyTorch model with load_state_dict(strict=True) and
// evaluates there (float64, eval mode) to the loss in tests/golden_interop.h
// (tools/golden/make_interop.py). Here hpmc loads the same file and must
// evaluate to the same loss, on the CPU and on every GPU implementation.
#include <gtest/gtest.h>

#include <cmath>

#include "core/device.h"
#include "data/dataset.h"
#include "golden_interop.h"
#include "gpu_testing.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "model/trainer.h"
#include "testing.h"

namespace hpmc {
namespace {

// The model the file was written for (tools/golden/make_interop.py builds
// the same in PyTorch).
const char* kInterop = R"(name: interop
data: {format: mnist}
model:
  loss: bce
  layers:
    - {name: conv1, type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false}
    - {name: bn1, type: batchnorm2d}
    - {name: act1, type: prelu}
    - {name: pool1, type: maxpool2d}
    - {name: drop1, type: dropout, p: 0.25}
    - {name: up1, type: conv_transpose2d, out_channels: 4, kernel: 2, stride: 2}
    - {name: act2, type: leaky_relu, negative_slope: 0.2}
    - {name: conv2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
    - {name: out, type: sigmoid}
)";

// The formula images of make_interop.py.
Dataset formula_images() {
  const int n = golden::kInteropImages;
  Dataset d;
  d.images = Tensor::empty(Shape(n, 1, 28, 28), DType::kU8);
  d.labels = Tensor::zeros(Shape(n, 1, 1, 1), DType::kI32);
  uint8_t* p = d.images.data<uint8_t>();
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 784; ++k) p[i * 784 + k] = uint8_t((i * 131 + k * 29 + (k * k) % 17) % 256);
  return d;
}

EvalResult eval_checkpoint(Impl impl) {
  Config cfg = parse_config(kInterop, "interop.yaml");
  auto m = Model::build(cfg, impl, Shape(1, 1, 28, 28), 10);
  load_checkpoint(testing::source_dir() + "/tests/data/interop.safetensors", *m);
  return evaluate(*m, formula_images(), 8);
}

TEST(Interop, PyTorchLoadsTheCheckpointAndAgreesOnTheEvalLoss) {
  const EvalResult r = eval_checkpoint(Impl::kCpu);
  // float32 against PyTorch's float64 on the same weights and statistics.
  EXPECT_NEAR(r.loss, golden::kInteropBce, 1e-6 * golden::kInteropBce);
  EXPECT_NEAR(r.mse, golden::kInteropMse, 1e-5 * golden::kInteropMse);
}

TEST(GpuInterop, EveryImplAgreesWithPyTorchOnTheEvalLoss) {
  HPMC_REQUIRE_GPU();
  for (Impl impl : {Impl::kNaive, Impl::kTiled, Impl::kIm2col}) {
    SCOPED_TRACE(impl_name(impl));
    const EvalResult r = eval_checkpoint(impl);
    EXPECT_NEAR(r.loss, golden::kInteropBce, 1e-6 * golden::kInteropBce);
    EXPECT_NEAR(r.mse, golden::kInteropMse, 1e-5 * golden::kInteropMse);
  }
}

}  // namespace
}  // namespace hpmc
