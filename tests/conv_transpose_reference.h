// conv_transpose_reference.h — the transposed convolution written straight
// from PyTorch's definition, in double, for the CPU and GPU tests: each input
// pixel scatters a weighted copy of the kernel into the output,
//   y[n][o][i·st − pad + r][j·st − pad + s] += x[n][c][i][j] · w[c][o][r][s]
// (taps landing outside the H_out × W_out output dropped), then + b[o]; and
// the gradients of L = Σ dy ⊙ y read off the same loops (the chain rule on
// each scattered product): dx[n][c][i][j] += w[c][o][r][s]·dy[n][o][·][·],
// dw[c][o][r][s] += x[n][c][i][j]·dy[n][o][·][·], db[o] += Σ dy[n][o][·][·].
// It shares no code with the implementation (which runs the Conv2D kernels on
// the equivalent convolution) beyond conv_transpose_out_size.
//
// Layouts: x N×in×H×W, w [in, out, k, k], b [out], y N×out×H_out×W_out.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/conv_transpose2d_spec.h"

namespace hpmc::testing {

// One transposed-convolution configuration; name() is what a failure reports.
struct CtCase {
  int n, in, h, w, out, kernel, stride, pad, op;
  bool bias = true;

  ConvTranspose2dConfig config() const {
    return ConvTranspose2dConfig{in, out, kernel, stride, pad, op, bias};
  }
  Shape in_shape() const { return Shape(n, in, h, w); }
  int ho() const { return int(conv_transpose_out_size(h, kernel, stride, pad, op)); }
  int wo() const { return int(conv_transpose_out_size(w, kernel, stride, pad, op)); }
  size_t x_count() const { return size_t(n) * in * h * w; }
  size_t y_count() const { return size_t(n) * out * ho() * wo(); }
  size_t w_count() const { return size_t(in) * out * kernel * kernel; }
  std::string name() const {
    return str("n", n, "_in", in, "_", h, "x", w, "_out", out, "_k", kernel, "_s", stride, "_p",
               pad, "_op", op, bias ? "" : "_nobias");
  }
};

inline CtCase no_bias(CtCase c) {
  c.bias = false;
  return c;
}

// Calls f(xi, yi, wi) for every product of the scatter: input element
// xi = x[n][c][i][j] times weight wi = w[c][o][r][s] lands on output
// element yi = y[n][o][i·st − pad + r][j·st − pad + s]. Taps that fall
// outside the output are skipped.
template <typename F>
void ct_for_each_product(const CtCase& cc, F&& f) {
  const int ho = cc.ho(), wo = cc.wo(), k = cc.kernel;
  for (int n = 0; n < cc.n; ++n)
    for (int c = 0; c < cc.in; ++c)
      for (int i = 0; i < cc.h; ++i)
        for (int j = 0; j < cc.w; ++j) {
          const size_t xi = ((size_t(n) * cc.in + c) * cc.h + i) * cc.w + j;
          for (int o = 0; o < cc.out; ++o)
            for (int r = 0; r < k; ++r) {
              const int a = i * cc.stride - cc.pad + r;
              if (a < 0 || a >= ho) continue;
              for (int s = 0; s < k; ++s) {
                const int e = j * cc.stride - cc.pad + s;
                if (e < 0 || e >= wo) continue;
                const size_t yi = ((size_t(n) * cc.out + o) * ho + a) * wo + e;
                const size_t wi = ((size_t(c) * cc.out + o) * k + r) * k + s;
                f(xi, yi, wi);
              }
            }
        }
}

// y = conv_transpose(x, w) + b (b ignored without bias), in double.
template <typename T>
std::vector<double> ct_reference_forward(const CtCase& cc, const std::vector<T>& x,
                                         const std::vector<T>& w, const std::vector<T>& b) {
  std::vector<double> y(cc.y_count(), 0.0);
  ct_for_each_product(cc, [&](size_t xi, size_t yi, size_t wi) {
    y[yi] += double(x[xi]) * double(w[wi]);
  });
  if (cc.bias) {
    const size_t plane = size_t(cc.ho()) * cc.wo();
    for (size_t i = 0; i < y.size(); ++i) y[i] += double(b[(i / plane) % size_t(cc.out)]);
  }
  return y;
}

struct CtGrads {
  std::vector<double> dx, dw, db;  // db empty without bias
};

// The gradients of L = Σ dy ⊙ conv_transpose(x, w, b), in double.
template <typename T>
CtGrads ct_reference_backward(const CtCase& cc, const std::vector<T>& x,
                              const std::vector<T>& w, const std::vector<T>& dy) {
  CtGrads g;
  g.dx.assign(cc.x_count(), 0.0);
  g.dw.assign(cc.w_count(), 0.0);
  ct_for_each_product(cc, [&](size_t xi, size_t yi, size_t wi) {
    g.dx[xi] += double(w[wi]) * double(dy[yi]);
    g.dw[wi] += double(x[xi]) * double(dy[yi]);
  });
  if (cc.bias) {
    g.db.assign(size_t(cc.out), 0.0);
    const size_t plane = size_t(cc.ho()) * cc.wo();
    for (size_t i = 0; i < dy.size(); ++i) g.db[(i / plane) % size_t(cc.out)] += double(dy[i]);
  }
  return g;
}

}  // namespace hpmc::testing

namespace hpmc::testing {
// GoogleTest prints parameters with this instead of a byte dump.
inline void PrintTo(const CtCase& c, std::ostream* os) { *os << c.name(); }
}  // namespace hpmc::testing
