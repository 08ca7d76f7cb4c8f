// GPU ConvTranspose2D (layers/gpu/conv_transpose2d.h): every kernel family —
// naive, tiled and implicit (--impl im2col) — against the scatter reference of
// conv_transpose_reference.h in double (itself checked against PyTorch and
// finite differences in test_conv_transpose.cpp) on fresh random inputs over
// a named sweep of odd shapes: forward, input gradient, and weight and bias
// gradients accumulated onto random starting values; the families against
// each other; misaligned pointers; bit-identical repeated runs. CUDA builds
// only (it calls the host functions directly; tests/CMakeLists.txt leaves it
// out of a build without CUDA). Every test starts with HPMC_REQUIRE_GPU().
//
// Device arrays sit between guard zones (dev_array.h): inputs' guards hold
// NaN (a read past either end poisons a result), outputs' a sentinel that must
// come back bit for bit; overwritten outputs (y, dx) start as NaN, so an
// element left unwritten fails.
//
// Error bound, as in test_gpu_conv.cpp: ‖gpu − ref‖∞ ≤ 1e-5·max(‖ref‖∞, 1e-30)
// per output. Each element is an fp32 sum of zero-mean U(−1, 1)-scaled terms
// (≤ in·⌈k/st⌉² for y, out·k² for dx, N·H·W for dw, N·H_out·W_out for db — at
// most 64·8·8 = 4096 and 4·32·32 = 4096 here), whose rounding error grows like
// √n·2^-24 relative to ‖ref‖∞ (≈ 4e-6 at n = 16384): 1e-5 holds with margin,
// while a dropped, doubled or misplaced term (≥ ~1e-3 relative) fails by two
// orders of magnitude. For the accumulated dw and db the reference includes
// the starting value.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conv_transpose_reference.h"
#include "core/error.h"
#include "core/rng.h"
#include "dev_array.h"
#include "gpu_testing.h"
#include "layers/conv_transpose2d_spec.h"
#include "layers/gpu/conv_transpose2d.h"
#include "layers/gpu/family.h"
#include "testing.h"

namespace hpmc {
namespace {

using gpu::Family;
using testing::CtCase;
using testing::DevArray;
using testing::kGuard;
using testing::kNaN;

constexpr double kTol = 1e-5;
const Family kFamilies[] = {Family::kNaive, Family::kTiled, Family::kIm2col};

using testing::rel_inf_error;

std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Fresh random inputs for one case: x and dy U(−1, 1), w and b like
// PyTorch's init (U(±1/sqrt(out·k·k))), and random starting gradients.
struct CtData {
  std::vector<float> x, w, b, dy, dw0, db0;
  CtData(const CtCase& cc, uint64_t seed) {
    Rng rng(seed);
    const float bound = 1.f / std::sqrt(float(cc.out * cc.kernel * cc.kernel));
    x = testing::random_floats(cc.x_count(), rng);
    w = testing::random_floats(cc.w_count(), rng);
    for (auto& v : w) v *= bound;
    b = testing::random_floats(size_t(cc.out), rng);
    for (auto& v : b) v *= bound;
    dy = testing::random_floats(cc.y_count(), rng);
    dw0 = testing::random_floats(cc.w_count(), rng);
    db0 = testing::random_floats(size_t(cc.out), rng);
  }
};

uint64_t seed_of(const CtCase& cc) {
  return 9100 + uint64_t(cc.n) * 7 + cc.in * 31 + cc.out * 131 + cc.h * 17 + cc.w +
         cc.kernel * 3 + cc.stride * 5 + cc.pad * 11 + cc.op * 13;
}

struct Results {
  std::vector<float> y, dx, dw, db;  // db empty without bias
};

// One forward, backward_data and backward_params on the device, every array
// between guards; `misalign` shifts every array off 16-byte alignment.
Results run_family(const CtCase& cc, Family family, const CtData& d, size_t misalign = 0) {
  const Conv2dShape eq = conv_transpose2d_equivalent_conv(cc.config(), cc.in_shape());
  auto x = testing::input(d.x, misalign), w = testing::input(d.w, misalign);
  auto b = testing::input(d.b, misalign), dy = testing::input(d.dy, misalign);
  DevArray y(cc.y_count(), misalign), dx(cc.x_count(), misalign);
  DevArray dw(cc.w_count(), misalign), db(size_t(cc.out), misalign);
  y.upload(std::vector<float>(cc.y_count(), kNaN), kGuard);
  dx.upload(std::vector<float>(cc.x_count(), kNaN), kGuard);
  dw.upload(d.dw0, kGuard);
  db.upload(d.db0, kGuard);

  gpu::conv_transpose2d_forward(family, eq, x->ptr(), w->ptr(), cc.bias ? b->ptr() : nullptr,
                                y.ptr());
  testing::finish("conv_transpose2d forward");
  gpu::conv_transpose2d_backward_data(family, eq, dy->ptr(), w->ptr(), dx.ptr());
  testing::finish("conv_transpose2d backward_data");
  gpu::conv_transpose2d_backward_params(family, eq, x->ptr(), dy->ptr(), dw.ptr(),
                                        cc.bias ? db.ptr() : nullptr);
  testing::finish("conv_transpose2d backward_params");

  EXPECT_TRUE(y.guards_intact(kGuard)) << "y";
  EXPECT_TRUE(dx.guards_intact(kGuard)) << "dx";
  EXPECT_TRUE(dw.guards_intact(kGuard)) << "dw";
  EXPECT_TRUE(db.guards_intact(kGuard)) << "db";
  Results r{y.payload(), dx.payload(), dw.payload(), {}};
  if (cc.bias) r.db = db.payload();
  else EXPECT_EQ(db.payload(), d.db0) << "db written without a bias";
  return r;
}

struct Reference {
  std::vector<double> y, dx, dw, db;
};

Reference reference(const CtCase& cc, const CtData& d) {
  Reference r;
  r.y = testing::ct_reference_forward(cc, d.x, d.w, d.b);
  testing::CtGrads g = testing::ct_reference_backward(cc, d.x, d.w, d.dy);
  r.dx = std::move(g.dx);
  r.dw = std::move(g.dw);
  for (size_t i = 0; i < r.dw.size(); ++i) r.dw[i] += double(d.dw0[i]);
  if (cc.bias) {
    r.db = std::move(g.db);
    for (size_t i = 0; i < r.db.size(); ++i) r.db[i] += double(d.db0[i]);
  }
  return r;
}

void expect_close(const Results& got, const Reference& ref, bool bias, double tol) {
  EXPECT_LE(rel_inf_error(got.y, ref.y), tol) << "forward y";
  EXPECT_LE(rel_inf_error(got.dx, ref.dx), tol) << "input gradient dx";
  EXPECT_LE(rel_inf_error(got.dw, ref.dw), tol) << "weight gradient dw (accumulated)";
  if (bias) {
    EXPECT_LE(rel_inf_error(got.db, ref.db), tol) << "bias gradient db (accumulated)";
  }
}

class GpuConvTransposeSweep : public ::testing::TestWithParam<CtCase> {};

TEST_P(GpuConvTransposeSweep, EveryFamilyMatchesReference) {
  HPMC_REQUIRE_GPU();
  const CtCase& cc = GetParam();
  const CtData d(cc, seed_of(cc));
  const Reference ref = reference(cc, d);
  for (Family f : kFamilies) {
    SCOPED_TRACE(str("family ", gpu::family_name(f)));
    expect_close(run_family(cc, f, d), ref, cc.bias, kTol);
  }
}

TEST_P(GpuConvTransposeSweep, FamiliesAgreeWithEachOther) {
  HPMC_REQUIRE_GPU();
  const CtCase& cc = GetParam();
  const CtData d(cc, seed_of(cc) + 1);
  const Results naive = run_family(cc, Family::kNaive, d);
  const Reference as_ref{to_double(naive.y), to_double(naive.dx), to_double(naive.dw),
                         to_double(naive.db)};
  for (Family f : {Family::kTiled, Family::kIm2col}) {
    SCOPED_TRACE(str("family ", gpu::family_name(f), " vs naive"));
    // Both sides carry fp32 rounding: twice the bound against the reference.
    expect_close(run_family(cc, f, d), as_ref, cc.bias, 2 * kTol);
  }
}

using testing::no_bias;

// {n, in, h, w, out, kernel, stride, pad, op}: batch 1 and 2–64, 1/3/5
// channels, strides 1, 2 and 3 with every output_padding, kernels 1 to 5,
// sizes that are multiples of no tile, and shapes that reach the implicit
// family's special paths through the equivalent convolution (C = out, K = in):
// thin kernels (in ≤ 4), the tap-major orders (stride 1, in and out multiples
// of 8), the thin-input weight gradient (3x3 s1 p1, out ≤ 4 < in).
INSTANTIATE_TEST_SUITE_P(
    GpuConvTransposeShapes, GpuConvTransposeSweep,
    ::testing::Values(
        CtCase{1, 1, 5, 7, 1, 3, 2, 1, 1}, CtCase{1, 3, 5, 7, 5, 3, 2, 1, 1},
        CtCase{2, 5, 7, 5, 3, 3, 2, 1, 0}, CtCase{3, 3, 4, 5, 1, 5, 2, 2, 1},
        CtCase{1, 5, 3, 4, 3, 5, 3, 2, 2}, CtCase{2, 1, 6, 5, 5, 4, 2, 1, 0},
        CtCase{2, 3, 5, 5, 3, 2, 2, 0, 0}, CtCase{1, 3, 9, 11, 5, 3, 1, 1, 0},
        CtCase{2, 5, 5, 7, 3, 3, 3, 0, 2}, CtCase{1, 1, 1, 1, 3, 3, 2, 0, 1},
        CtCase{2, 5, 5, 7, 3, 1, 1, 0, 0}, CtCase{2, 3, 5, 7, 5, 1, 2, 0, 1},
        CtCase{2, 17, 5, 6, 3, 3, 2, 1, 1}, CtCase{2, 20, 9, 11, 24, 3, 2, 1, 1},
        CtCase{2, 16, 17, 15, 8, 3, 2, 1, 1}, CtCase{1, 4, 33, 31, 4, 3, 2, 1, 1},
        // a decoder's upsampling layer: 16x16 → 32x32
        CtCase{4, 8, 16, 16, 3, 4, 2, 1, 0},
        // large batch: dw reduces over 64·8·8 positions, db over 64·16·16
        CtCase{64, 5, 8, 8, 3, 3, 2, 1, 1},
        CtCase{2, 64, 8, 8, 32, 3, 1, 1, 0}, CtCase{2, 8, 9, 7, 3, 3, 1, 1, 0},
        no_bias(CtCase{2, 3, 5, 7, 5, 3, 2, 1, 1}), no_bias(CtCase{1, 5, 3, 4, 3, 5, 3, 2, 2})),
    [](const ::testing::TestParamInfo<CtCase>& p) { return p.param.name(); });

TEST(GpuConvTransposeLayout, MisalignedPointersGiveTheSameResults) {
  HPMC_REQUIRE_GPU();
  // Arrays off 16-byte alignment take the kernels' scalar paths.
  for (const CtCase& cc : {CtCase{2, 3, 8, 8, 4, 4, 2, 1, 0}, CtCase{2, 8, 9, 8, 8, 3, 1, 1, 0}}) {
    SCOPED_TRACE(cc.name());
    const CtData d(cc, seed_of(cc) + 2);
    const Reference ref = reference(cc, d);
    for (Family f : kFamilies) {
      SCOPED_TRACE(str("family ", gpu::family_name(f)));
      expect_close(run_family(cc, f, d, /*misalign=*/1), ref, cc.bias, kTol);
    }
  }
}

TEST(GpuConvTransposeLayout, RepeatedRunsAreBitIdentical) {
  HPMC_REQUIRE_GPU();
  const CtCase cc{9, 6, 17, 15, 5, 3, 2, 1, 1};
  const CtData d(cc, 31);
  auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
    return u.size() == v.size() &&
           (u.empty() || std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0);
  };
  for (Family f : kFamilies) {
    SCOPED_TRACE(str("family ", gpu::family_name(f)));
    const Results a = run_family(cc, f, d);
    // A bigger call in between makes the implicit family's workspace grow.
    const CtCase big{16, 16, 20, 20, 16, 4, 2, 1, 0};
    run_family(big, f, CtData(big, 3));
    const Results b = run_family(cc, f, d);
    EXPECT_TRUE(same(a.y, b.y)) << "y";
    EXPECT_TRUE(same(a.dx, b.dx)) << "dx";
    EXPECT_TRUE(same(a.dw, b.dw)) << "dw";
    EXPECT_TRUE(same(a.db, b.db)) << "db";
  }
}

}  // namespace
}  // namespace hpmc
