// training.precision (core/precision.h) from the config to the layers: the
// key and --precision, the impls that refuse a precision (each with its one
// line, before any layer is built), the CPU layers in bf16 against double
// references on bf16-rounded operands (and the FP32 layers failing those
// references, so that a layer that ignored its precision would be caught),
// training in bf16 beside fp32, and a bf16 checkpoint evaluated in fp32 and
// bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "gpu_testing.h"
#include "core/bf16.h"
#include "core/bf16gemm.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "layers/cpu/conv2d_ops.h"
#include "layers/cpu/conv2d_thin.h"
#include "layers/layer.h"
#include "model/config.h"
#include "model/model.h"
#include "model/registry.h"
#include "model/trainer.h"
#include "synthetic_data.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::run_hpmc;

const char* kMlp = R"(name: mlp
data: {format: mnist}
model:
  loss: softmax_cross_entropy
  layers:
    - {name: flat, type: flatten}
    - {name: fc1, type: linear, out_features: 64}
    - {name: relu1, type: relu}
    - {name: fc2, type: linear, out_features: 10}
training: {epochs: 3, batch_size: 32, lr: 0.03, momentum: 0.9, seed: 1}
)";

// Conv2d on both of its bf16 paths (conv1: 24 output channels, im2col +
// the bf16 GEMM; conv2: 1 channel, the thin kernels) and a transposed conv.
const char* kAe = R"(name: ae
data: {format: mnist}
model:
  loss: mse
  features: pool
  layers:
    - {name: conv1, type: conv2d, out_channels: 24, kernel: 3, padding: 1}
    - {name: relu1, type: relu}
    - {name: pool, type: maxpool2d}
    - {name: up, type: conv_transpose2d, out_channels: 8, kernel: 2, stride: 2}
    - {name: relu2, type: relu}
    - {name: conv2, type: conv2d, out_channels: 1, kernel: 3, padding: 1}
training: {epochs: 4, batch_size: 16, lr: 0.05, momentum: 0.9, seed: 2}
)";

Config config(const std::string& text, const std::string& precision = "") {
  std::vector<Override> ov;
  if (!precision.empty())
    ov.push_back({"training.precision=" + precision, "--precision " + precision});
  return parse_config(text, "t.yaml", ov);
}

// kMlp with training.precision: p in the file.
std::string in_file(const std::string& p) {
  std::string text = kMlp;
  text.replace(text.find("seed: 1}"), 8, "seed: 1, precision: " + p + "}");
  return text;
}

// The message of the hpmc::Error that f throws, and its exit code.
struct Thrown {
  std::string what;
  ExitCode code = ExitCode::kOk;
};
Thrown thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.what(), e.code()};
  }
  return {"(no error)", ExitCode::kOk};
}

// ---- the key -------------------------------------------------------------------

TEST(Precision, NamesParseAndRoundTrip) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16})
    EXPECT_EQ(parse_precision(precision_name(p)), p);
  EXPECT_STREQ(precision_name(Precision::kBf16), "bf16");
  const Thrown t = thrown([] { parse_precision("fp16"); });
  EXPECT_EQ(t.what, "unknown precision 'fp16'; choose one of: fp32, tf32, bf16");
  EXPECT_EQ(t.code, ExitCode::kUsage);
}

// The thread's current precision (what the GPU kernel families read): fp32
// outside any scope, the innermost scope's inside, restored as scopes end,
// and per thread.
TEST(Precision, ScopesNestAndStayOnTheirThread) {
  EXPECT_EQ(current_precision(), Precision::kFp32);
  {
    const ScopedPrecision outer(Precision::kBf16);
    EXPECT_EQ(current_precision(), Precision::kBf16);
    {
      const ScopedPrecision inner(Precision::kTf32);
      EXPECT_EQ(current_precision(), Precision::kTf32);
      Precision other = Precision::kBf16;
      std::thread([&] { other = current_precision(); }).join();
      EXPECT_EQ(other, Precision::kFp32);
    }
    EXPECT_EQ(current_precision(), Precision::kBf16);
  }
  EXPECT_EQ(current_precision(), Precision::kFp32);
}

TEST(Precision, ConfigKeyDefaultsToFp32AndIsRecorded) {
  Config c = config(kMlp);
  EXPECT_EQ(c.training.precision, Precision::kFp32);
  EXPECT_EQ(c.resolved["training"]["precision"].as<std::string>(), "fp32");  // config.yaml

  c = parse_config(in_file("bf16"), "t.yaml");
  EXPECT_EQ(c.training.precision, Precision::kBf16);
  EXPECT_EQ(c.resolved["training"]["precision"].as<std::string>(), "bf16");
  EXPECT_EQ(config(kMlp, "tf32").training.precision, Precision::kTf32);

  const Thrown t = thrown([] { config(kMlp, "bf61"); });
  EXPECT_EQ(t.code, ExitCode::kConfig);
  EXPECT_EQ(t.what,
            "--precision bf61: training.precision: unknown value 'bf61' (did you mean 'bf16'?); "
            "choose one of: fp32, tf32, bf16");
}

// ---- refusals ------------------------------------------------------------------

Thrown build_error(const std::string& text, Impl impl, const std::string& precision) {
  return thrown([&] { Model::build(config(text, precision), impl, Shape(1, 1, 28, 28), 10); });
}

TEST(Precision, ImplsThatCannotRunAPrecisionSayWhatToDo) {
  struct Case {
    Impl impl;
    const char* precision;
    const char* message;
  } cases[] = {
      {Impl::kNaive, "bf16",
       "--precision bf16: training.precision bf16 with --impl naive: naive and tiled are FP32 "
       "reference kernels; use --impl im2col or training.precision: fp32"},
      {Impl::kTiled, "tf32",
       "--precision tf32: training.precision tf32 with --impl tiled: naive and tiled are FP32 "
       "reference kernels; use --impl im2col or training.precision: fp32"},
      {Impl::kCpu, "tf32",
       "--precision tf32: training.precision tf32 with --impl cpu: TF32 is a tensor-core "
       "format; the CPU runs fp32 or bf16"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str(impl_name(c.impl), " ", c.precision));
    // Refused before the device is looked at: the same line on a machine
    // without a GPU (here) as with one.
    const Thrown t = build_error(kMlp, c.impl, c.precision);
    EXPECT_EQ(t.what, c.message);
    EXPECT_EQ(t.code, ExitCode::kUsage);
    EXPECT_EQ(precision_refusal(c.impl, parse_precision(c.precision)).empty(), false);
  }
  // Where the key was set is named: a config file's line and column.
  const Thrown t = thrown([] {
    Model::build(parse_config(in_file("bf16"), "t.yaml"), Impl::kNaive, Shape(1, 1, 28, 28), 10);
  });
  EXPECT_EQ(t.what.rfind("t.yaml:10:84: training.precision bf16 with --impl naive: ", 0), 0u)
      << t.what;
  // What every impl runs.
  for (Impl i : {Impl::kCpu, Impl::kNaive, Impl::kTiled, Impl::kIm2col})
    EXPECT_EQ(precision_refusal(i, Precision::kFp32), "") << impl_name(i);
  EXPECT_EQ(precision_refusal(Impl::kCpu, Precision::kBf16), "");
  EXPECT_EQ(precision_refusal(Impl::kIm2col, Precision::kTf32), "");
  EXPECT_EQ(precision_refusal(Impl::kIm2col, Precision::kBf16), "");
}

// A layer's own impl key is held to the precision too: in a run of im2col
// layers in bf16, a layer that asks for naive is refused, by name. (Without a
// GPU the run is refused first, for the missing device.)
TEST(Precision, ALayersOwnImplIsHeldToThePrecision) {
  HPMC_REQUIRE_GPU();
  std::string text = kMlp;
  text.replace(text.find("out_features: 64}"), 17, "out_features: 64, impl: naive}");
  const Thrown t = thrown([&] {
    Model::build(config(text, "bf16"), Impl::kIm2col, Shape(1, 1, 28, 28), 10);
  });
  EXPECT_NE(t.what.find("'naive' with training.precision bf16: naive and tiled are FP32 "
                        "reference kernels"),
            std::string::npos)
      << t.what;
  EXPECT_EQ(t.code, ExitCode::kConfig);  // the layer's key in the config
}

TEST(Precision, CommandsRefuseBeforeTraining) {
  auto r = run_hpmc("bench configs/fashion_mlp.yaml --precision bf16 --impl tiled --steps 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "hpmc: error: --precision bf16: training.precision bf16 with --impl tiled: naive and "
            "tiled are FP32 reference kernels; use --impl im2col or training.precision: fp32\n");
  EXPECT_EQ(r.out, "");  // nothing ran, not even the layer table
  // --impl auto picks first, then the precision is checked against its pick
  // (where it picks the CPU: with a GPU, im2col runs tf32).
  if (!gpu::compiled_with_cuda() || gpu::device_count() == 0) {
    r = run_hpmc("run configs/fashion_mlp.yaml --impl auto --precision tf32 --out /nonexistent/x");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("training.precision tf32 with --impl cpu"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.out.find("impl auto: "), std::string::npos) << r.out;
  }
}


// ---- the layers in bf16 ----------------------------------------------------------

constexpr double kU = 1.0 / 16777216;  // FP32's unit roundoff, 2^-24

// A layer's products, element by element: f(xi, yi, wi) for every
// y[yi] += x[xi]·w[wi] of its forward pass; its input gradient and weight
// gradient are the same products read the other way round. The bias of
// output element yi is bias_of(yi).
struct Products {
  std::function<void(const std::function<void(size_t, size_t, size_t)>&)> each;
  std::function<size_t(size_t)> bias_of;
};

Products conv2d_products(const Conv2dShape& sh) {
  Products p;
  p.each = [sh](const std::function<void(size_t, size_t, size_t)>& f) {
    for (int n = 0; n < sh.N; ++n)
      for (int k = 0; k < sh.K; ++k)
        for (int oh = 0; oh < sh.P; ++oh)
          for (int ow = 0; ow < sh.Q; ++ow)
            for (int c = 0; c < sh.C; ++c)
              for (int r = 0; r < sh.R; ++r)
                for (int s = 0; s < sh.S; ++s) {
                  const int ih = oh * sh.stride - sh.pad + r, iw = ow * sh.stride - sh.pad + s;
                  if (ih < 0 || ih >= sh.H || iw < 0 || iw >= sh.W) continue;
                  f(((size_t(n) * sh.C + c) * sh.H + ih) * sh.W + iw,
                    ((size_t(n) * sh.K + k) * sh.P + oh) * sh.Q + ow,
                    ((size_t(k) * sh.C + c) * sh.R + r) * sh.S + s);
                }
  };
  p.bias_of = [sh](size_t yi) { return (yi / (size_t(sh.P) * sh.Q)) % size_t(sh.K); };
  return p;
}

// The layer's outputs and gradients for x, dy and its parameters (weight,
// bias), gradients started at zero.
struct Pass {
  std::vector<float> y, dx, dw, db;
};

// A GPU layer (gpu) gets device copies and hands its results back.
Pass run_layer(Layer& l, const Shape& in, const std::vector<float>& x, const std::vector<float>& dy,
               std::vector<float> w, std::vector<float> b, bool gpu = false) {
  const Device dev = gpu ? Device::kGPU : Device::kCPU;
  const auto tensor = [&](const std::vector<float>& v, const Shape& s) {
    Tensor t = Tensor::empty(s);
    std::copy(v.begin(), v.end(), t.data<float>());
    return t.to_device(dev);
  };
  const auto host = [](const Tensor& t) {
    const Tensor h = t.to_device(Device::kCPU);
    return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
  };
  const auto flat = [](size_t n) { return Shape(1, int(std::max<size_t>(n, 1)), 1, 1); };
  Tensor tw = tensor(w, flat(w.size())), tb = tensor(b, flat(b.size()));
  Tensor tdw = tensor(std::vector<float>(w.size(), 0.f), flat(w.size()));
  Tensor tdb = tensor(std::vector<float>(b.size(), 0.f), flat(b.size()));
  l.bind({tw.data<float>(), tb.data<float>()}, {tdw.data<float>(), tdb.data<float>()});
  Tensor tx = tensor(x, in), ty = Tensor::empty(l.output_shape(in), DType::kF32, dev);
  l.forward(tx, ty);
  Tensor tdy = tensor(dy, ty.shape()), tdx = Tensor::empty(in, DType::kF32, dev);
  l.backward(tx, ty, tdy, &tdx);
  Pass p;
  p.y = host(ty), p.dx = host(tdx);
  p.dw = host(tdw), p.db = host(tdb);
  p.dw.resize(w.size()), p.db.resize(b.size());
  return p;
}

// The exact results on bf16-rounded x, w and dy (bias and the bias gradient
// from the values as they are: they are not products), with, per element,
// Σ|terms| and the number of products summed.
struct Reference {
  std::vector<double> y, dx, dw, db, my, mdx, mdw;
  std::vector<int> ny, ndx, ndw;
};

Reference reference(const Products& pr, const std::vector<float>& x, const std::vector<float>& dy,
                    const std::vector<float>& w, const std::vector<float>& b) {
  Reference r;
  r.y.assign(dy.size(), 0), r.my = r.y, r.ny.assign(dy.size(), 0);
  r.dx.assign(x.size(), 0), r.mdx = r.dx, r.ndx.assign(x.size(), 0);
  r.dw.assign(w.size(), 0), r.mdw = r.dw, r.ndw.assign(w.size(), 0);
  r.db.assign(b.size(), 0);
  pr.each([&](size_t xi, size_t yi, size_t wi) {
    const double xv = round_bf16(x[xi]), wv = round_bf16(w[wi]), dv = round_bf16(dy[yi]);
    r.y[yi] += xv * wv, r.my[yi] += std::fabs(xv * wv), ++r.ny[yi];
    r.dx[xi] += wv * dv, r.mdx[xi] += std::fabs(wv * dv), ++r.ndx[xi];
    r.dw[wi] += xv * dv, r.mdw[wi] += std::fabs(xv * dv), ++r.ndw[wi];
  });
  for (size_t yi = 0; yi < dy.size(); ++yi) {
    const size_t o = pr.bias_of(yi);
    r.y[yi] += b[o], r.my[yi] += std::fabs(b[o]);
    r.db[o] += dy[yi];
  }
  return r;
}

// Elements of `got` outside (n + 4)·u·Σ|terms| of the reference: FP32 sums
// of exact products (and a bias add) and nothing else.
int violations(const std::vector<float>& got, const std::vector<double>& ref,
               const std::vector<double>& mag, const std::vector<int>& n, const char* what,
               bool report) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = (n[i] + 4) * kU * mag[i] + 1e-30;
    if (!(std::fabs(got[i] - ref[i]) <= tol)) {
      if (report && bad < 3)
        ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << ref[i]
                      << " (" << n[i] << " products), |error| " << std::fabs(got[i] - ref[i])
                      << " > " << tol;
      ++bad;
    }
  }
  return bad;
}

// The layer `type` with `keys` in bf16 meets the rounded-operand reference
// in its output, input gradient and weight gradient (and its bias gradient is
// the FP32 sum of dy); the same layer in fp32 misses it on more than
// `fp32_misses` of the elements (most of them, but for long sums: the
// rounding's error grows as √k, the bound as k).
void check_bf16_layer(const std::string& type, const std::string& keys, const Shape& in,
                      const std::function<Products(const Layer&)>& products,
                      Impl impl = Impl::kCpu, double fp32_misses = 0.5) {
  SCOPED_TRACE(type + " " + keys + " on " + in.str() + " " + impl_name(impl));
  LayerPtr bf = make_layer(type, keys, impl, in, "l", Precision::kBf16);
  LayerPtr fp = make_layer(type, keys, impl, in, "l", Precision::kFp32);
  const bool gpu = impl != Impl::kCpu;
  ASSERT_EQ(bf->precision(), Precision::kBf16);
  ASSERT_EQ(fp->precision(), Precision::kFp32);
  const std::vector<ParamSpec> specs = bf->param_specs();
  ASSERT_EQ(specs.size(), 2u);
  Rng rng(17);
  auto draw = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = rng.uniform(-1.f, 1.f);
    return v;
  };
  const std::vector<float> x = draw(in.count()), w = draw(specs[0].count()),
                           b = draw(specs[1].count()),
                           dy = draw(bf->output_shape(in).count());
  const Reference r = reference(products(*bf), x, dy, w, b);

  const Pass p = run_layer(*bf, in, x, dy, w, b, gpu);
  EXPECT_EQ(violations(p.y, r.y, r.my, r.ny, "y", true), 0);
  EXPECT_EQ(violations(p.dx, r.dx, r.mdx, r.ndx, "dx", true), 0);
  EXPECT_EQ(violations(p.dw, r.dw, r.mdw, r.ndw, "dw", true), 0);
  for (size_t o = 0; o < b.size(); ++o)
    EXPECT_NEAR(p.db[o], r.db[o], 1e-5 * (1 + std::fabs(r.db[o]))) << "db[" << o << "]";

  const Pass q = run_layer(*fp, in, x, dy, w, b, gpu);
  EXPECT_GT(violations(q.y, r.y, r.my, r.ny, "y", false), int(fp32_misses * q.y.size()));
  EXPECT_GT(violations(q.dx, r.dx, r.mdx, r.ndx, "dx", false), int(fp32_misses * q.dx.size()));
  EXPECT_GT(violations(q.dw, r.dw, r.mdw, r.ndw, "dw", false), int(fp32_misses * q.dw.size()));
}

Products conv2d_of(const Layer& l, const Shape& in) {
  return conv2d_products(dynamic_cast<const Conv2dSpec&>(l).conv_shape(in));
}

TEST(PrecisionLayers, Conv2dInBf16OnTheGemmPath) {
  struct Case {
    const char* keys;
    Shape in;
  } cases[] = {
      {"{out_channels: 24, kernel: 3, padding: 1}", Shape(3, 5, 9, 7)},
      {"{out_channels: 17, kernel: 3, stride: 2}", Shape(2, 6, 11, 10)},
      {"{out_channels: 33, kernel: 1}", Shape(2, 19, 5, 3)},  // pointwise: no im2col
  };
  for (const Case& c : cases) {
    LayerPtr l = make_layer("conv2d", c.keys, Impl::kCpu, c.in, "l", Precision::kBf16);
    ASSERT_FALSE(
        cpu::conv2d_thin_applies(dynamic_cast<const Conv2dSpec&>(*l).conv_shape(c.in),
                                 Precision::kBf16))
        << c.keys;
    check_bf16_layer("conv2d", c.keys, c.in,
                     [&](const Layer& x) { return conv2d_of(x, c.in); });
  }
}

TEST(PrecisionLayers, Conv2dInBf16OnTheThinPath) {
  struct Case {
    const char* keys;
    Shape in;
  } cases[] = {
      {"{out_channels: 3, kernel: 3, padding: 1}", Shape(3, 17, 10, 12)},
      {"{out_channels: 5, kernel: 5, stride: 2, padding: 2}", Shape(2, 4, 13, 9)},
      {"{out_channels: 16, kernel: 3, padding: 1}", Shape(2, 7, 8, 19)},
  };
  for (const Case& c : cases) {
    LayerPtr l = make_layer("conv2d", c.keys, Impl::kCpu, c.in, "l", Precision::kBf16);
    ASSERT_TRUE(
        cpu::conv2d_thin_applies(dynamic_cast<const Conv2dSpec&>(*l).conv_shape(c.in),
                                 Precision::kBf16))
        << c.keys;
    check_bf16_layer("conv2d", c.keys, c.in,
                     [&](const Layer& x) { return conv2d_of(x, c.in); });
  }
}

// The gemm path's forward and input-gradient passes in bf16 pack the weights
// once per call where bf16gemm runs amx or avx512_bf16 (conv2d_ops.h): their
// bits are those of one bf16gemm call per image with the weights as they are
// (im2col, the product, col2im), which they were before. On the
// avx512_bf16 path a stride-1 "same" kernel's forward and weight gradient
// read the column matrix straight from the image instead (Bf16ShiftedB):
// the same bits again; the weight gradient checked on one image (the order
// of its per-thread partial sums is another test's). Shapes with a weight K
// past one 512-pair block (130·3·3 = 1170), odd everything, a stride, a
// pointwise kernel (no im2col), a 5x5 kernel over a 2x3 image (rows wholly
// in the padding), and 33x33 outputs (1,089 pixels: the weight gradient's
// K in two blocks, the forward's N in three); a second call after another
// shape repacks into the same workspace.
TEST(PrecisionLayers, Conv2dBf16PackedWeightsGiveThePerImageBits) {
  std::printf("  bf16 GEMM path: %s\n", bf16gemm_path_name(bf16gemm_path()));
  const Conv2dShape shapes[] = {
      make_conv2d_shape(3, 130, 7, 5, 21, 3, 3, 1, 1),
      make_conv2d_shape(2, 7, 11, 10, 33, 3, 3, 2, 0),
      make_conv2d_shape(3, 19, 5, 3, 37, 1, 1, 1, 0),
      make_conv2d_shape(2, 3, 2, 3, 20, 5, 5, 1, 2),
      make_conv2d_shape(2, 4, 33, 33, 24, 3, 3, 1, 1),
      make_conv2d_shape(3, 130, 7, 5, 21, 3, 3, 1, 1),
  };
  cpu::Conv2dWorkspace<float> ws;
  Rng rng(23);
  for (const Conv2dShape& sh : shapes) {
    SCOPED_TRACE("C=" + std::to_string(sh.C) + " K=" + std::to_string(sh.K) +
                 " R=" + std::to_string(sh.R) + " stride=" + std::to_string(sh.stride));
    ASSERT_FALSE(cpu::conv2d_thin_applies(sh, Precision::kBf16));
    auto draw = [&](size_t n) {
      std::vector<float> v(n);
      for (float& f : v) f = rng.uniform(-1.f, 1.f);
      return v;
    };
    const int rows = sh.col_rows(), cols = sh.col_cols();
    const std::vector<float> x = draw(size_t(sh.N) * sh.in_sample()), w = draw(sh.weight_count()),
                             b = draw(size_t(sh.K)), dy = draw(size_t(sh.N) * sh.out_sample());
    std::vector<float> y(dy.size()), dx(x.size()), y_ref(dy.size()), dx_ref(x.size());
    cpu::conv2d_gemm_forward(sh, x.data(), w.data(), b.data(), y.data(), ws, Precision::kBf16);
    cpu::conv2d_gemm_backward_data(sh, dy.data(), w.data(), dx.data(), ws, Precision::kBf16);
    std::vector<float> col(size_t(rows) * cols);
    for (int n = 0; n < sh.N; ++n) {
      const float* xn = x.data() + n * sh.in_sample();
      float* yn = y_ref.data() + n * sh.out_sample();
      const float* c = xn;
      if (!sh.is_pointwise()) {
        cpu::im2col(sh, xn, col.data());
        c = col.data();
      }
      for (int k = 0; k < sh.K; ++k)
        std::fill(yn + size_t(k) * cols, yn + size_t(k + 1) * cols, b[size_t(k)]);
      bf16gemm(false, false, sh.K, cols, rows, 1.f, w.data(), rows, c, cols, 1.f, yn, cols);
      const float* dyn = dy.data() + n * sh.out_sample();
      float* dxn = dx_ref.data() + n * sh.in_sample();
      if (sh.is_pointwise()) {
        bf16gemm(true, false, rows, cols, sh.K, 1.f, w.data(), rows, dyn, cols, 0.f, dxn, cols);
        continue;
      }
      bf16gemm(true, false, rows, cols, sh.K, 1.f, w.data(), rows, dyn, cols, 0.f, col.data(),
               cols);
      std::fill(dxn, dxn + sh.in_sample(), 0.f);
      cpu::col2im(sh, col.data(), dxn);
    }
    EXPECT_EQ(0, std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float))) << "y";
    EXPECT_EQ(0, std::memcmp(dx.data(), dx_ref.data(), dx.size() * sizeof(float))) << "dx";

    // The weight gradient of the first image: dw += (0 + dy_0 · col_0^T).
    Conv2dShape one = sh;
    one.N = 1;
    const std::vector<float> dw0 = draw(sh.weight_count());
    std::vector<float> dw = dw0, part(sh.weight_count(), 0.f), dw_ref(sh.weight_count());
    float* no_db = nullptr;
    cpu::conv2d_gemm_backward_params(one, x.data(), dy.data(), dw.data(), no_db, ws,
                                     Precision::kBf16);
    const float* c = x.data();
    if (!sh.is_pointwise()) {
      cpu::im2col(sh, x.data(), col.data());
      c = col.data();
    }
    bf16gemm(false, true, sh.K, rows, cols, 1.f, dy.data(), cols, c, cols, 1.f, part.data(), rows);
    for (size_t i = 0; i < dw.size(); ++i) dw_ref[i] = dw0[i] + (0.f + part[i]);
    EXPECT_EQ(0, std::memcmp(dw.data(), dw_ref.data(), dw.size() * sizeof(float))) << "dw";
  }
}

// A bf16 conv layer on the gemm path counts the weights it packs once a pass
// in its workspace (where the amx or avx512_bf16 path packs them); the thin
// path and fp32 pack none.
TEST(PrecisionLayers, Conv2dBf16WorkspaceCountsThePackedWeights) {
  const Shape in(4, 130, 7, 5);
  for (const char* keys : {"{out_channels: 21, kernel: 3, padding: 1}",
                           "{out_channels: 3, kernel: 3, padding: 1}"}) {
    SCOPED_TRACE(keys);
    LayerPtr bf = make_layer("conv2d", keys, Impl::kCpu, in, "l", Precision::kBf16);
    LayerPtr fp = make_layer("conv2d", keys, Impl::kCpu, in, "l", Precision::kFp32);
    const Conv2dShape sh = dynamic_cast<const Conv2dSpec&>(*bf).conv_shape(in);
    const size_t packed = cpu::conv2d_packed_weights_bytes(sh, Precision::kBf16);
    EXPECT_EQ(bf->workspace_bytes(in), fp->workspace_bytes(in) + packed);
    EXPECT_EQ(cpu::conv2d_packed_weights_bytes(sh, Precision::kFp32), 0u);
    if (cpu::conv2d_thin_applies(sh, Precision::kBf16) || !bf16gemm_packs_a())
      EXPECT_EQ(packed, 0u);
    else if (bf16gemm_path() == Bf16GemmPath::kAvx512Bf16)
      // the forward's W, 21 rows (24 in 8-row panels) of 585 pairs, over W^T's 1176 × 11
      EXPECT_EQ(packed, size_t(24) * 585 * 4);
    else  // amx: W, 21 rows (32 in 16-row panels) × 37 tiles of 16 pairs (1170 k), and W^T,
          // 1170 rows (1184) × 1 tile, are as large
      EXPECT_EQ(packed, size_t(32) * 37 * 16 * 4);
  }
}

TEST(PrecisionLayers, ConvTranspose2dInBf16) {
  // Its products through the scatter definition (conv_transpose_reference.h
  // in the other tests): x[n][c][i][j]·w[c][o][r][s] lands on
  // y[n][o][i·st − pad + r][j·st − pad + s].
  struct Case {
    const char* keys;
    Shape in;
    int out, k, st, pad;
  } cases[] = {
      {"{out_channels: 20, kernel: 3, stride: 2, padding: 1}", Shape(2, 5, 4, 6), 20, 3, 2, 1},
      {"{out_channels: 2, kernel: 2, stride: 2}", Shape(3, 7, 5, 5), 2, 2, 2, 0},  // thin
  };
  for (const Case& c : cases) {
    const Shape out = make_layer("conv_transpose2d", c.keys, Impl::kCpu, c.in)->output_shape(c.in);
    auto products = [&](const Layer&) {
      Products p;
      p.each = [&](const std::function<void(size_t, size_t, size_t)>& f) {
        for (int n = 0; n < c.in.n; ++n)
          for (int ch = 0; ch < c.in.c; ++ch)
            for (int i = 0; i < c.in.h; ++i)
              for (int j = 0; j < c.in.w; ++j)
                for (int o = 0; o < c.out; ++o)
                  for (int r = 0; r < c.k; ++r)
                    for (int s = 0; s < c.k; ++s) {
                      const int a = i * c.st - c.pad + r, e = j * c.st - c.pad + s;
                      if (a < 0 || a >= out.h || e < 0 || e >= out.w) continue;
                      f(((size_t(n) * c.in.c + ch) * c.in.h + i) * c.in.w + j,
                        ((size_t(n) * c.out + o) * out.h + a) * out.w + e,
                        ((size_t(ch) * c.out + o) * c.k + r) * c.k + s);
                    }
      };
      p.bias_of = [&](size_t yi) { return (yi / (size_t(out.h) * out.w)) % size_t(c.out); };
      return p;
    };
    check_bf16_layer("conv_transpose2d", c.keys, c.in, products);
  }
}

Products linear_products(int batch, int in, int out) {
  Products p;
  p.each = [=](const std::function<void(size_t, size_t, size_t)>& f) {
    for (int n = 0; n < batch; ++n)
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) f(size_t(n) * in + i, size_t(n) * out + o, size_t(o) * in + i);
  };
  p.bias_of = [=](size_t yi) { return yi % size_t(out); };
  return p;
}

// On the GPU's tensor cores: a small layer (its products rounded as they are
// staged) and one large enough that the layer packs x, W and dY once each
// (gemm_tc::packs; odd in_features, so the packed rows carry zero padding;
// sums of 1001 and 600 products, where FP32 misses the bf16 bound on only
// about half the elements).
TEST(PrecisionLayers, LinearInBf16OnTheGpu) {
  HPMC_REQUIRE_GPU();
  for (const auto& [batch, in, out] : {std::tuple{7, 129, 33}, {256, 1001, 600}}) {
    check_bf16_layer("linear", str("{out_features: ", out, "}"), Shape(batch, in, 1, 1),
                     [&, batch = batch, in = in, out = out](const Layer&) {
                       return linear_products(batch, in, out);
                     },
                     Impl::kIm2col, in > 500 ? 0.25 : 0.5);
  }
}

TEST(PrecisionLayers, LinearInBf16) {
  for (const auto& [batch, in, out] : {std::tuple{1, 37, 5}, {7, 129, 33}, {64, 300, 70}}) {
    check_bf16_layer("linear", str("{out_features: ", out, "}"), Shape(batch, in, 1, 1),
                     [&, batch = batch, in = in, out = out](const Layer&) {
                       return linear_products(batch, in, out);
                     });
  }
}

// Every layer of a bf16 model knows its precision, a fused one too.
TEST(PrecisionLayers, TheModelHandsItsPrecisionToEveryLayer) {
  auto m = Model::build(config(kAe, "bf16"), Impl::kCpu, Shape(1, 1, 28, 28), 10);
  EXPECT_EQ(m->precision(), Precision::kBf16);
  for (const LayerPtr& l : m->layers()) EXPECT_EQ(l->precision(), Precision::kBf16) << l->name();
  m = Model::build(config(kAe), Impl::kCpu, Shape(1, 1, 28, 28), 10);
  for (const LayerPtr& l : m->layers()) EXPECT_EQ(l->precision(), Precision::kFp32) << l->name();
}

// ---- training --------------------------------------------------------------------

struct Trained {
  std::vector<EpochResult> epochs;
  EvalResult before;
};

Trained train(const char* text, const std::string& precision, const Dataset& tr,
              const Dataset& te, Impl impl = Impl::kCpu) {
  Config cfg = config(text, precision);
  auto m = Model::build(cfg, impl, Shape(1, 1, 28, 28), 10);
  m->params().init(cfg.training.seed);
  Trained t;
  t.before = evaluate(*m, te, 32);
  Trainer trainer(*m, cfg.training);
  trainer.set_progress(Trainer::Progress::kQuiet);
  std::ostringstream log;
  t.epochs = trainer.fit(tr, te, log);
  return t;
}

// bf16 trains as fp32 does: the loss falls epoch by epoch to within a few
// percent of fp32's, and the classifier scores alike. BF16 keeps FP32's
// exponent range, so there is no loss scaling.
TEST(PrecisionTraining, Bf16TracksFp32) {
  {
    const Dataset tr = testing::synthetic_classes(1500, 1), te = testing::synthetic_classes(300, 2);
    const Trained f = train(kMlp, "fp32", tr, te), b = train(kMlp, "bf16", tr, te);
    ASSERT_EQ(b.epochs.size(), 3u);
    EXPECT_LT(b.epochs[2].train_loss, 0.5 * b.epochs[0].train_loss);
    EXPECT_NEAR(b.epochs[2].test.loss, f.epochs[2].test.loss, 0.05 * f.epochs[2].test.loss + 0.01);
    EXPECT_NEAR(b.epochs[2].test.accuracy, f.epochs[2].test.accuracy, 0.02);
    EXPECT_GE(b.epochs[2].test.accuracy, 0.95);
  }
  {
    const Dataset tr = testing::synthetic_blobs(400, 3), te = testing::synthetic_blobs(96, 4);
    const Trained f = train(kAe, "fp32", tr, te), b = train(kAe, "bf16", tr, te);
    ASSERT_EQ(b.epochs.size(), 4u);
    EXPECT_LT(b.epochs[3].test.loss, 0.5 * b.before.loss);
    for (size_t e = 1; e < b.epochs.size(); ++e)
      EXPECT_LT(b.epochs[e].train_loss, b.epochs[e - 1].train_loss) << "epoch " << e + 1;
    EXPECT_NEAR(b.epochs[3].test.loss, f.epochs[3].test.loss, 0.05 * f.epochs[3].test.loss);
    // Not fp32 under another name.
    EXPECT_NE(b.epochs[3].test.loss, f.epochs[3].test.loss);
  }
}

// On the GPU's tensor cores (--impl im2col): bf16 rounds the operands as the
// CPU does (to nearest even), so the MLP's trajectory is the CPU bf16 one up
// to the order of FP32 sums; tf32 and bf16 both track fp32, the autoencoder
// too (its one-channel first and last layers keep FP32 products on the GPU,
// so it only tracks the CPU's bf16 run).
TEST(PrecisionTraining, TensorCoresTrackTheCpu) {
  HPMC_REQUIRE_GPU();
  {
    const Dataset tr = testing::synthetic_classes(1500, 1), te = testing::synthetic_classes(300, 2);
    const Trained f = train(kMlp, "fp32", tr, te, Impl::kIm2col);
    const Trained cpu_b = train(kMlp, "bf16", tr, te);
    for (const char* p : {"bf16", "tf32"}) {
      SCOPED_TRACE(p);
      const Trained g = train(kMlp, p, tr, te, Impl::kIm2col);
      ASSERT_EQ(g.epochs.size(), 3u);
      EXPECT_LT(g.epochs[2].train_loss, 0.5 * g.epochs[0].train_loss);
      EXPECT_NEAR(g.epochs[2].test.loss, f.epochs[2].test.loss,
                  0.05 * f.epochs[2].test.loss + 0.01);
      EXPECT_NEAR(g.epochs[2].test.accuracy, f.epochs[2].test.accuracy, 0.02);
      EXPECT_NE(g.epochs[2].train_loss, f.epochs[2].train_loss) << "fp32 under another name";
      if (std::string(p) == "bf16")
        for (size_t e = 0; e < 3; ++e)
          EXPECT_NEAR(g.epochs[e].train_loss, cpu_b.epochs[e].train_loss,
                      1e-3 * cpu_b.epochs[e].train_loss)
              << "epoch " << e + 1;
    }
  }
  {
    const Dataset tr = testing::synthetic_blobs(400, 3), te = testing::synthetic_blobs(96, 4);
    const Trained f = train(kAe, "fp32", tr, te, Impl::kIm2col);
    for (const char* p : {"bf16", "tf32"}) {
      SCOPED_TRACE(p);
      const Trained g = train(kAe, p, tr, te, Impl::kIm2col);
      ASSERT_EQ(g.epochs.size(), 4u);
      EXPECT_LT(g.epochs[3].test.loss, 0.5 * g.before.loss);
      EXPECT_NEAR(g.epochs[3].test.loss, f.epochs[3].test.loss, 0.05 * f.epochs[3].test.loss);
      EXPECT_NE(g.epochs[3].test.loss, f.epochs[3].test.loss);
    }
  }
}

// A bf16 run writes FP32 master weights; its checkpoint evaluates in fp32
// and in bf16, the latter reproducing the run's own test loss.
TEST(PrecisionTraining, Bf16CheckpointEvaluatesInFp32AndBf16) {
  testing::TempDir t;
  const std::string data =
      " --set data.synthetic=true --set data.train_limit=256 --set data.test_limit=64 ";
  auto r = run_hpmc("run configs/fashion_ae.yaml --precision bf16 --epochs 1 --batch 32" + data +
                    "--progress quiet --out " + t.file("run") + " --weights-dir " + t.file("w"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find(", impl cpu, precision bf16, "), std::string::npos) << r.out;
  EXPECT_NE(testing::slurp(t.file("run/config.yaml")).find("precision: bf16"), std::string::npos);

  const std::string ckpt = t.file("w/fashion_ae.safetensors");
  SafetensorsFile f = SafetensorsFile::read(ckpt);
  EXPECT_EQ(f.metadata().at("precision"), "bf16");
  ASSERT_FALSE(f.tensors().empty());
  for (const SafetensorsTensor& tn : f.tensors()) EXPECT_EQ(tn.dtype, "F32") << tn.name;

  auto eval = [&](const std::string& p) {
    auto e = run_hpmc("eval configs/fashion_ae.yaml --impl cpu --weights " + ckpt + data +
                      "--precision " + p);
    EXPECT_EQ(e.code, 0) << e.err;
    EXPECT_NE(e.out.find("precision " + p), std::string::npos) << e.out;
    return std::stod(e.out.substr(e.out.find("test loss ") + 10));
  };
  const double in_bf16 = eval("bf16"), in_fp32 = eval("fp32");
  const std::string csv = testing::slurp(t.file("run/metrics.csv"));
  std::stringstream rows(csv.substr(csv.find('\n') + 1));
  std::vector<std::string> f1;
  for (std::string x; std::getline(rows, x, ',');) f1.push_back(x);
  ASSERT_GT(f1.size(), 3u) << csv;
  EXPECT_NEAR(in_bf16, std::stod(f1[3]), 1e-5 * in_bf16) << csv;
  EXPECT_NEAR(in_fp32, in_bf16, 0.02 * in_bf16);
  EXPECT_NE(in_fp32, in_bf16);
}

}  // namespace
}  // namespace hpmc
