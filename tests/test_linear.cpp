// Linear on the CPU: hand-computed forward and backward, finite-difference
// gradients of the templated ops in double (batch 1 included), the float
// layer against plain loops at sizes that split across threads, the gradient
// convention, determinism, and shape/config errors.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "layers/cpu/linear.h"
#include "layers/cpu/linear_ops.h"
#include "testing.h"

namespace hpmc {
namespace {

using testing::expect_gradients_close;
using testing::max_rel_error;
using testing::numerical_gradient;
using testing::random_vector;

std::vector<float> to_vector(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

Tensor from_vector(const Shape& s, const std::vector<float>& v) {
  Tensor t = Tensor::empty(s);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// A LinearCPU with its parameters and zeroed gradient buffers, bound.
struct LinearFixture {
  LinearCPU layer;
  std::vector<float> w, b, gw, gb;

  LinearFixture(const LinearConfig& cfg, std::vector<float> weight, std::vector<float> bias)
      : layer("fc", cfg), w(std::move(weight)), b(std::move(bias)) {
    gw.assign(w.size(), 0.f);
    gb.assign(b.size(), 0.f);
    std::vector<float*> params{w.data()}, grads{gw.data()};
    if (cfg.bias) {
      params.push_back(b.data());
      grads.push_back(gb.data());
    }
    layer.bind(params, grads);
    layer.set_input_shape(Shape(1, cfg.in_features, 1, 1));
  }

  static LinearFixture random(const LinearConfig& cfg, Rng& rng) {
    const float bound = 1.f / std::sqrt(float(cfg.in_features));
    std::vector<float> weight(size_t(cfg.in_features) * cfg.out_features), bias;
    for (auto& v : weight) v = rng.uniform(-bound, bound);
    if (cfg.bias) {
      bias.resize(size_t(cfg.out_features));
      for (auto& v : bias) v = rng.uniform(-bound, bound);
    }
    return LinearFixture(cfg, std::move(weight), std::move(bias));
  }

  LinearFixture(LinearFixture&&) = delete;  // the layer holds pointers into the vectors

  Tensor forward(const Tensor& x) {
    Tensor y = Tensor::empty(layer.output_shape(x.shape()));
    layer.forward(x, y);
    return y;
  }
};

// ---- hand-computed ---------------------------------------------------------------

// W = [[1, 2, 3], [-1, 0, 1]], b = [0.5, -1], x = [[1, 1, 1], [2, 0, -1]].
const std::vector<float> kW = {1, 2, 3, -1, 0, 1};
const std::vector<float> kB = {0.5f, -1};
const std::vector<float> kX = {1, 1, 1, 2, 0, -1};

TEST(LinearForward, HandComputed) {
  // y0 = [1+2+3+0.5, -1+0+1-1], y1 = [2+0-3+0.5, -2+0-1-1]
  const std::vector<float> expected = {6.5f, -1, -0.5f, -4};
  LinearFixture f(LinearConfig{3, 2, true}, kW, kB);
  EXPECT_EQ(to_vector(f.forward(from_vector(Shape(2, 3, 1, 1), kX))), expected);

  std::vector<float> y(4, -7.f);
  cpu::linear_forward(2, 3, 2, kX.data(), kW.data(), kB.data(), y.data());
  EXPECT_EQ(y, expected);
  cpu::linear_forward(2, 3, 2, kX.data(), kW.data(), static_cast<const float*>(nullptr), y.data());
  EXPECT_EQ(y, (std::vector<float>{6, 0, -1, -3}));
}

TEST(LinearBackward, HandComputed) {
  // dy = identity: dW = dy^T·x = x, db = [1, 1], dx = dy·W = W.
  LinearFixture f(LinearConfig{3, 2, true}, kW, kB);
  Tensor x = from_vector(Shape(2, 3, 1, 1), kX);
  Tensor y = f.forward(x);
  Tensor dx = Tensor::empty(x.shape());
  f.layer.backward(x, y, from_vector(y.shape(), {1, 0, 0, 1}), &dx);
  EXPECT_EQ(f.gw, kX);
  EXPECT_EQ(f.gb, (std::vector<float>{1, 1}));
  EXPECT_EQ(to_vector(dx), kW);
}

// ---- finite differences in double -------------------------------------------------

// L = Σ r ⊙ (x·W^T + b); analytic gradients against central differences.
void check_gradients(int batch, int in, int out) {
  SCOPED_TRACE(str("batch ", batch, ", ", in, "->", out));
  Rng rng(uint64_t(batch * 1000 + in * 10 + out));
  auto x = random_vector(size_t(batch) * in, rng);
  auto w = random_vector(size_t(out) * in, rng);
  auto b = random_vector(size_t(out), rng);
  auto r = random_vector(size_t(batch) * out, rng);

  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww,
                  const std::vector<double>& bb) {
    std::vector<double> y(r.size());
    cpu::linear_forward(batch, in, out, xx.data(), ww.data(), bb.data(), y.data());
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += r[i] * y[i];
    return l;
  };

  std::vector<double> dx(x.size(), 99.0), dw(w.size(), 0.0), db(b.size(), 0.0);
  cpu::linear_backward_data(batch, in, out, r.data(), w.data(), dx.data());
  cpu::linear_backward_params(batch, in, out, x.data(), r.data(), dw.data(), db.data());

  const double tol = 1e-6;
  expect_gradients_close(dx, numerical_gradient([&](const auto& v) { return loss(v, w, b); }, x),
                         tol, "dx");
  expect_gradients_close(dw, numerical_gradient([&](const auto& v) { return loss(x, v, b); }, w),
                         tol, "dw");
  expect_gradients_close(db, numerical_gradient([&](const auto& v) { return loss(x, w, v); }, b),
                         tol, "db");
}

TEST(LinearGradients, MatchFiniteDifferences) {
  check_gradients(3, 5, 4);
  check_gradients(4, 17, 33);
  // Large enough (batch·in·out >= 2^15) to take the multi-threaded split.
  check_gradients(2, 130, 130);
}

TEST(LinearGradients, BatchOneMatchesFiniteDifferences) {
  check_gradients(1, 7, 3);
  check_gradients(1, 1, 1);
}

// ---- the float layer against plain loops ------------------------------------------

void expect_layer_matches_loops(int batch, int in, int out, bool bias) {
  SCOPED_TRACE(str("batch ", batch, ", ", in, "->", out, bias ? "" : ", no bias"));
  Rng rng(uint64_t(batch + in + out));
  LinearFixture f = LinearFixture::random(LinearConfig{in, out, bias}, rng);
  Tensor x = testing::random_tensor(Shape(batch, in, 1, 1), rng);
  Tensor y = f.forward(x);
  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = Tensor::empty(x.shape());
  f.layer.backward(x, y, dy, &dx);

  const float* X = x.data<float>();
  const float* DY = dy.data<float>();
  std::vector<double> y_ref(y.numel()), dx_ref(x.numel(), 0.0), dw_ref(f.w.size(), 0.0),
      db_ref(size_t(out), 0.0);
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o) {
      double acc = bias ? f.b[o] : 0.0;
      double d = DY[n * out + o];
      for (int i = 0; i < in; ++i) {
        acc += double(X[n * in + i]) * f.w[size_t(o) * in + i];
        dx_ref[size_t(n) * in + i] += d * f.w[size_t(o) * in + i];
        dw_ref[size_t(o) * in + i] += d * X[n * in + i];
      }
      y_ref[size_t(n) * out + o] = acc;
      db_ref[o] += d;
    }

  const double tol = 1e-5;
  EXPECT_LE(max_rel_error(y.data<float>(), y_ref.data(), y_ref.size()), tol) << "y";
  EXPECT_LE(max_rel_error(dx.data<float>(), dx_ref.data(), dx_ref.size()), tol) << "dx";
  EXPECT_LE(max_rel_error(f.gw.data(), dw_ref.data(), dw_ref.size()), tol) << "dw";
  if (bias) {
    EXPECT_LE(max_rel_error(f.gb.data(), db_ref.data(), db_ref.size()), tol) << "db";
  }
}

TEST(LinearLayer, MatchesPlainLoops) {
  expect_layer_matches_loops(64, 784, 128, true);  // MNIST MLP, split across threads
  expect_layer_matches_loops(5, 37, 300, true);
  expect_layer_matches_loops(7, 300, 10, false);
  expect_layer_matches_loops(3, 4, 2, true);  // below the threading threshold
}

TEST(LinearLayer, BatchOne) {
  expect_layer_matches_loops(1, 784, 128, true);
  expect_layer_matches_loops(1, 128, 10, true);
  expect_layer_matches_loops(1, 3, 1, false);
}

// ---- gradient convention and determinism -----------------------------------------

TEST(LinearLayer, BackwardAccumulatesParamGradsAndOverwritesDx) {
  Rng rng(3);
  LinearFixture f = LinearFixture::random(LinearConfig{200, 70, true}, rng);
  Tensor x = testing::random_tensor(Shape(9, 200, 1, 1), rng);
  Tensor y = f.forward(x);
  Tensor dy = testing::random_tensor(y.shape(), rng);
  Tensor dx = testing::random_tensor(x.shape(), rng);  // garbage to be overwritten

  f.layer.backward(x, y, dy, &dx);
  const std::vector<float> gw1 = f.gw, gb1 = f.gb, dx1 = to_vector(dx);
  f.layer.backward(x, y, dy, &dx);
  for (size_t i = 0; i < gw1.size(); ++i) ASSERT_EQ(f.gw[i], 2 * gw1[i]) << "dw[" << i << "]";
  for (size_t i = 0; i < gb1.size(); ++i) ASSERT_EQ(f.gb[i], 2 * gb1[i]) << "db[" << i << "]";
  EXPECT_EQ(to_vector(dx), dx1);

  // Without dx (the first layer) the parameter gradients are unchanged.
  LinearFixture g(f.layer.config(), f.w, f.b);
  g.layer.backward(x, y, dy, nullptr);
  EXPECT_EQ(g.gw, gw1);
  EXPECT_EQ(g.gb, gb1);
}

TEST(LinearLayer, RepeatedRunsAreBitIdentical) {
  Rng rng(4);
  LinearFixture f = LinearFixture::random(LinearConfig{300, 100, true}, rng);
  Tensor x = testing::random_tensor(Shape(16, 300, 1, 1), rng);
  Tensor dy = testing::random_tensor(Shape(16, 100, 1, 1), rng);
  auto run = [&] {
    std::fill(f.gw.begin(), f.gw.end(), 0.f);
    std::fill(f.gb.begin(), f.gb.end(), 0.f);
    Tensor y = f.forward(x);
    Tensor dx = Tensor::empty(x.shape());
    f.layer.backward(x, y, dy, &dx);
    std::vector<float> all = to_vector(y);
    for (float v : to_vector(dx)) all.push_back(v);
    all.insert(all.end(), f.gw.begin(), f.gw.end());
    all.insert(all.end(), f.gb.begin(), f.gb.end());
    return all;
  };
  const std::vector<float> first = run();
  const std::vector<float> second = run();
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
}

// ---- metadata and errors ------------------------------------------------------------

TEST(LinearLayer, Metadata) {
  LinearCPU fc("fc1", LinearConfig{784, 128, true});
  EXPECT_STREQ(fc.type(), "linear");
  EXPECT_STREQ(fc.impl(), "cpu");
  EXPECT_EQ(fc.describe(), "784->128");
  EXPECT_EQ(fc.config().in_features, 784);
  auto specs = fc.param_specs();
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name, "weight");
  EXPECT_EQ(specs[0].dims, (std::vector<int>{128, 784}));
  EXPECT_EQ(specs[0].fan_in, 784);
  EXPECT_EQ(specs[1].name, "bias");
  EXPECT_EQ(specs[1].dims, (std::vector<int>{128}));
  EXPECT_EQ(specs[1].fan_in, 784);
  EXPECT_EQ(fc.output_shape(Shape(32, 784, 1, 1)), Shape(32, 128, 1, 1));

  LinearCPU nb("fc2", LinearConfig{10, 3, false});
  EXPECT_EQ(nb.describe(), "10->3 no-bias");
  EXPECT_EQ(nb.param_specs().size(), 1u);
}

std::string shape_error_of(const LinearCPU& fc, const Shape& in) {
  try {
    fc.output_shape(in);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

TEST(LinearLayer, NonFlatInputIsShapeError) {
  LinearCPU fc("fc", LinearConfig{784, 10, true});
  std::string msg = shape_error_of(fc, Shape(1, 1, 28, 28));
  EXPECT_NE(msg.find("784"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1x28x28"), std::string::npos) << msg;
  EXPECT_NE(msg.find("flatten"), std::string::npos) << msg;
  EXPECT_THROW(fc.set_input_shape(Shape(1, 1, 28, 28)), ShapeError);
}

TEST(LinearLayer, WrongFeatureCountIsShapeError) {
  LinearCPU fc("fc", LinearConfig{784, 10, true});
  std::string msg = shape_error_of(fc, Shape(1, 100, 1, 1));
  EXPECT_NE(msg.find("784"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100"), std::string::npos) << msg;
}

TEST(LinearLayer, InvalidConfigIsConfigError) {
  EXPECT_THROW(LinearCPU("fc", (LinearConfig{0, 10, true})), ConfigError);
  EXPECT_THROW(LinearCPU("fc", (LinearConfig{10, -1, true})), ConfigError);
  try {
    LinearCPU fc("fc", LinearConfig{10, 0, true});
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("out_features"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpmc
