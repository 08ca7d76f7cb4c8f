// conv2d_thin.cpp — the thin-layer convolution of conv2d_thin.h: padded
// copies, weight packing, tap offsets, threads and the choice of instruction
// set. The register-tiled loops are in conv2d_thin_kernels.inc, compiled
// below once per instruction set, each copy in its own namespace so that no
// AVX-512 code can be merged into a function the portable path calls.
#include "layers/cpu/conv2d_thin.h"
#include "layers/cpu/conv2d_thin_bf16.h"
#include "layers/cpu/conv2d_thin_util.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/bf16.h"
#include "core/error.h"
#include "core/threads.h"

// The AVX2 and AVX-512 copies use GCC's `#pragma GCC target`; other
// compilers and machines get the portable copy only.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HPMC_THIN_X86 1
#include <immintrin.h>
#else
#define HPMC_THIN_X86 0
#endif

namespace hpmc::cpu {
namespace thin_detail {

// A grid of outputs computed by register tiles (tile_grid):
//   out[o][i][j] = init + Σ_e wpack[o / ob][e][o % ob] · in[off[e] + i·in_row + j]
// for o < n_out, i < rows, j < cols; j runs along the SIMD lanes.
// init is bias[o] (0 if bias is null), or out itself when accumulating.
template <typename T>
struct TileJob {
  const T* in;
  ptrdiff_t in_row;       // input elements from one output row to the next
  const ptrdiff_t* off;   // n_entries tap offsets into `in`
  int n_entries;
  const T* wpack;         // ceil(n_out / ob) blocks of [n_entries][ob]
  size_t wpack_stride;    // elements from one block to the next
  const T* bias;          // n_out values, or null
  bool accumulate;
  int n_out, rows, cols;
  T* out;
  ptrdiff_t out_ch, out_row, out_col;  // output strides of o, i and j
  int ob, qb;             // tile: ob channels × qb vectors (× tile_rows rows)
};

// A weight gradient summed over a group of images (wgrad_grid):
//   dw[k·dw_k + e] += Σ_g<images Σ_i<rows Σ_j<vectors·lanes
//                       dy[g·dy_image + k·dy_plane + i·dy_row + j] · in[g·in_image + off[e] + i·in_row + j]
// for k < `k`, e < n_entries; dy holds 0 in the lanes past a row's end.
template <typename T>
struct WgradJob {
  int images;
  ptrdiff_t in_image, dy_image;
  const T* in;
  ptrdiff_t in_row;
  const ptrdiff_t* off;  // n_entries offsets, then 8 readable ghost entries
  int n_entries;
  const T* dy;
  ptrdiff_t dy_plane, dy_row;
  int k, rows, vectors;  // vectors: a multiple of qb
  int qb;                 // vectors per tile
  double* dw;
  ptrdiff_t dw_k;
};

// The input copy read by the forward and weight-gradient tiles, per channel:
// padded row h holds input row h - pad, split into `stride` column phases of
// phase_len values: phase f, index j holds column j·stride + f - pad (0 in
// the padding). Output (p, q) reads tap (r, s) at row p·stride + r, phase
// s % stride, index q + s / stride — consecutive q are adjacent in memory.
// Rows and phases reach as far as whole tiles read (ghost rows, ghost lanes).
struct PaddedInput {
  int rows, phase_len;
  ptrdiff_t row, plane;  // elements per padded row (all phases) and per channel
  int chunk;             // channels copied (and then consumed) at a time
};

// One instruction set's kernels and the tile sizes they use.
template <typename T>
struct ThinKernels {
  int lanes;
  int (*tile_rows)(int ob, int qb);
  void (*copy_in)(const Conv2dShape& sh, const PaddedInput& g, const T* x_img, int c0, int cn,
                  T* dst);
  void (*tiles)(const TileJob<T>&);
  void (*wgrad)(const WgradJob<T>&);
};

// ---- portable: GCC vector extensions, 16 bytes (SSE2, NEON or scalar) --------

namespace portable {

constexpr int kRegisters = 16;

typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

template <typename T, typename Vec>
struct VectorExtSimd {
  using V = Vec;
  static constexpr int kLanes = int(sizeof(V) / sizeof(T));
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof v); }
  static V load_part(const T* p, int n) {
    V v{};
    std::memcpy(&v, p, n * sizeof(T));
    return v;
  }
  static void store_part(T* p, V v, int n) { std::memcpy(p, &v, n * sizeof(T)); }
  static V set1(T a) {
    V v;
    for (int l = 0; l < kLanes; ++l) v[l] = a;
    return v;
  }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static void in_register(V&) {}
  static T hsum(V v) {
    T s = 0;
    for (int l = 0; l < kLanes; ++l) s += v[l];
    return s;
  }
};

template <typename T>
struct Simd;
template <>
struct Simd<float> : VectorExtSimd<float, v4f> {};
template <>
struct Simd<double> : VectorExtSimd<double, v2d> {};

#include "layers/cpu/conv2d_thin_kernels.inc"

}  // namespace portable

#if HPMC_THIN_X86

// in_register(v): an empty asm that takes v in a vector register, so that
// GCC loads an input vector once for all the multiply-adds that use it
// instead of folding a (usually cache-line-splitting) load into each.
#define HPMC_IN_REGISTER(v) __asm__("" : "+v"(v))

// ---- AVX2 + FMA --------------------------------------------------------------

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {

constexpr int kRegisters = 16;

template <typename T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_part(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store_part(float* p, V v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void in_register(V& v) { HPMC_IN_REGISTER(v); }
  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

template <>
struct Simd<double> {
  using V = __m256d;
  static constexpr int kLanes = 4;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
  }
  static V load_part(const double* p, int n) { return _mm256_maskload_pd(p, mask(n)); }
  static void store_part(double* p, V v, int n) { _mm256_maskstore_pd(p, mask(n), v); }
  static V set1(double a) { return _mm256_set1_pd(a); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static void in_register(V& v) { HPMC_IN_REGISTER(v); }
  static double hsum(V v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
  }
};

#include "layers/cpu/conv2d_thin_kernels.inc"

}  // namespace avx2
#pragma GCC pop_options

// ---- AVX-512F ----------------------------------------------------------------

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
namespace avx512 {

constexpr int kRegisters = 32;

template <typename T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_part(const float* p, int n) {
    return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p);
  }
  static void store_part(float* p, V v, int n) {
    _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
  }
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void in_register(V& v) { HPMC_IN_REGISTER(v); }
  // Halved by __builtin_shufflevector: GCC 12 warns inside the AVX-512
  // shuffle and reduce intrinsics about the undefined register they pass.
  static float hsum(V v) {
    const __m256 h = _mm256_add_ps(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
    return avx2::Simd<float>::hsum(h);
  }
};

template <>
struct Simd<double> {
  using V = __m512d;
  static constexpr int kLanes = 8;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V load_part(const double* p, int n) {
    return _mm512_maskz_loadu_pd(__mmask8((1u << n) - 1), p);
  }
  static void store_part(double* p, V v, int n) {
    _mm512_mask_storeu_pd(p, __mmask8((1u << n) - 1), v);
  }
  static V set1(double a) { return _mm512_set1_pd(a); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static void in_register(V& v) { HPMC_IN_REGISTER(v); }
  static double hsum(V v) {
    const __m256d h = _mm256_add_pd(__builtin_shufflevector(v, v, 0, 1, 2, 3),
                                    __builtin_shufflevector(v, v, 4, 5, 6, 7));
    return avx2::Simd<double>::hsum(h);
  }
};

#include "layers/cpu/conv2d_thin_kernels.inc"

}  // namespace avx512
#pragma GCC pop_options

#undef HPMC_IN_REGISTER

#endif  // HPMC_THIN_X86

template <typename T>
const ThinKernels<T>& kernels_for(SimdLevel level) {
  HPMC_CHECK(simd_level_supported(level), "this CPU cannot run the ", simd_level_name(level),
             " convolution kernels");
#if HPMC_THIN_X86
  static const ThinKernels<T> table[] = {portable::kernels<T>(), avx2::kernels<T>(),
                                         avx512::kernels<T>()};
  return table[int(level)];
#else
  static const ThinKernels<T> only = portable::kernels<T>();
  return only;
#endif
}

// ---- layout helpers ---------------------------------------------------------------

template <typename T>
void prepare(Conv2dThinWorkspace<T>& ws) {
  const size_t n = size_t(std::max(num_threads(), 1));
  if (ws.in.size() < n) {
    ws.in.resize(n);
    ws.aux.resize(n);
    ws.dw.resize(n);
    ws.db.resize(n);
  }
  ws.used.assign(n, 0);
}

// `images`: how many images' copies are held at once (their chunks share
// the budget).
PaddedInput padded_input(const Conv2dShape& sh, int tile_rows, int tile_vectors, int lanes,
                         size_t elem, int images = 1) {
  PaddedInput g;
  g.rows = (round_up(sh.P, tile_rows) - 1) * sh.stride + sh.R;
  g.phase_len = round_up(round_up(ceil_div(sh.Q, lanes), tile_vectors) * lanes +
                             (sh.S - 1) / sh.stride,
                         lanes);
  g.row = ptrdiff_t(sh.stride) * g.phase_len;
  g.plane = g.rows * g.row;
  g.chunk = int(std::clamp<size_t>(kChunkBytes / (size_t(g.plane) * elem * images), 1,
                                   size_t(sh.C)));
  return g;
}

// Offsets of taps (c, r, s), c < channels, in the layout of PaddedInput,
// channel-major like KCRS weights; `padded` entries, the rest 0.
void tap_offsets(const Conv2dShape& sh, const PaddedInput& g, int channels, size_t padded,
                 std::vector<ptrdiff_t>& off) {
  off.assign(std::max(padded, size_t(channels) * sh.R * sh.S), 0);
  size_t e = 0;
  for (int c = 0; c < channels; ++c)
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s)
        off[e++] = c * g.plane + r * g.row + (s % sh.stride) * g.phase_len + s / sh.stride;
}

// Vectors per output row, and per tile: two where the row has two or more.
inline int tile_vectors(int cols, int lanes) { return ceil_div(cols, lanes) >= 2 ? 2 : 1; }

// The operands of the products in `prec`, in place: bf16 rounds them
// (core/bf16.h) as they sit in the padded copies and the packed weights, so
// that the kernels multiply bf16 values exactly and sum in FP32. The double
// kernels (the tests' oracle) and tf32 (GPU only) have no bf16 form.
template <typename T>
void round_operands(T* p, size_t n, Precision prec) {
  if (prec == Precision::kFp32) return;
  if constexpr (std::is_same_v<T, float>) {
    HPMC_CHECK(prec == Precision::kBf16, "the CPU convolutions run fp32 or bf16, not ",
               precision_name(prec));
    round_bf16(p, p, n);
  } else {
    HPMC_CHECK(false, "the double convolutions run fp32 only, not ", precision_name(prec));
  }
}

}  // namespace thin_detail

// ---- instruction sets -------------------------------------------------------------

bool simd_level_supported(SimdLevel level) {
  switch (level) {
    case SimdLevel::kPortable:
      return true;
#if HPMC_THIN_X86
    case SimdLevel::kAvx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SimdLevel::kAvx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma");
#endif
    default:
      return false;
  }
}

SimdLevel best_simd_level() {
  static const SimdLevel best = simd_level_supported(SimdLevel::kAvx512) ? SimdLevel::kAvx512
                                : simd_level_supported(SimdLevel::kAvx2) ? SimdLevel::kAvx2
                                                                         : SimdLevel::kPortable;
  return best;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kPortable:
      return "portable";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "?";
}

// ---- forward ----------------------------------------------------------------------

template <typename T>
void conv2d_thin_forward(const Conv2dShape& sh, const T* x, const T* w, const T* b, T* y,
                         Conv2dThinWorkspace<T>& ws, SimdLevel level, Precision prec) {
  using namespace thin_detail;
  const ThinKernels<T>& kn = kernels_for<T>(level);
  if constexpr (std::is_same_v<T, float>)
    if (prec == Precision::kBf16 && conv2d_thin_bf16_dot(sh, level))
      return thin_bf16::forward(sh, x, w, b, y, ws);
  const int ob = channel_block(sh.K);
  const int qb = tile_vectors(sh.Q, kn.lanes);
  const PaddedInput g = padded_input(sh, kn.tile_rows(ob, qb), qb, kn.lanes, sizeof(T));
  const int taps = sh.R * sh.S, entries = sh.C * taps;

  tap_offsets(sh, g, g.chunk, 0, ws.offsets);
  // Weights as [K / ob][C·R·S][ob]: the weights of one tap for the ob
  // channels of a tile side by side; 0 for the ghost channels of the last.
  ws.wpack.assign(size_t(ceil_div(sh.K, ob)) * entries * ob, T(0));
  for (int k = 0; k < sh.K; ++k)
    for (int e = 0; e < entries; ++e)
      ws.wpack[(size_t(k / ob) * entries + e) * ob + k % ob] = w[size_t(k) * entries + e];
  round_operands(ws.wpack.data(), ws.wpack.size(), prec);
  prepare(ws);

#pragma omp parallel
  {
    T* buf = grow_aligned(ws.in[thread_index()], size_t(g.chunk) * g.plane);
    std::fill(buf, buf + g.chunk * g.plane, T(0));  // the padding, once
#pragma omp for schedule(static)
    for (int n = 0; n < sh.N; ++n)
      for (int c0 = 0; c0 < sh.C; c0 += g.chunk) {
        const int cn = std::min(g.chunk, sh.C - c0);
        kn.copy_in(sh, g, x + n * sh.in_sample(), c0, cn, buf);
        round_operands(buf, size_t(cn) * g.plane, prec);
        TileJob<T> jb;
        jb.in = buf;
        jb.in_row = sh.stride * g.row;
        jb.off = ws.offsets.data();
        jb.n_entries = cn * taps;
        jb.wpack = ws.wpack.data() + size_t(c0) * taps * ob;
        jb.wpack_stride = size_t(entries) * ob;
        jb.bias = b;
        jb.accumulate = c0 > 0;
        jb.n_out = sh.K;
        jb.rows = sh.P;
        jb.cols = sh.Q;
        jb.out = y + n * sh.out_sample();
        jb.out_ch = ptrdiff_t(sh.P) * sh.Q;
        jb.out_row = sh.Q;
        jb.out_col = 1;
        jb.ob = ob;
        jb.qb = qb;
        kn.tiles(jb);
      }
  }
}

// ---- backward data --------------------------------------------------------------

template <typename T>
void conv2d_thin_backward_data(const Conv2dShape& sh, const T* dy, const T* w, T* dx,
                               Conv2dThinWorkspace<T>& ws, SimdLevel level, Precision prec) {
  using namespace thin_detail;
  const ThinKernels<T>& kn = kernels_for<T>(level);
  if constexpr (std::is_same_v<T, float>)
    if (prec == Precision::kBf16 && conv2d_thin_bf16_dot(sh, level))
      return thin_bf16::backward_data(sh, dy, w, dx, ws);
  const int st = sh.stride, pad = sh.pad, L = kn.lanes;
  const int ob = std::min(sh.C, 4);  // input channels per tile
  const int qb = tile_vectors(ceil_div(sh.W, st), L);
  const int rb = kn.tile_rows(ob, qb);
  const int cblocks = ceil_div(sh.C, ob);

  // dx pixel (h, v) in phase (h % st, v % st) = (fh, fw) is reached by taps
  // r ≡ fh + pad and s ≡ fw + pad (mod st), from dy row (fh + pad - r) / st
  // + h / st and column (fw + pad - s) / st + v / st: per phase, a stride-1
  // correlation of dy with those taps, contiguous along v / st.
  struct Tap {
    int k, r, s, row, col;
  };
  struct Phase {
    int fh, fw, rows, cols;
    size_t first, count;
  };
  std::vector<Tap> taps;
  std::vector<Phase> phases;
  int min_row = 0, max_row = sh.P - 1, min_col = 0, max_col = sh.Q - 1;
  for (int fh = 0; fh < st && fh < sh.H; ++fh)
    for (int fw = 0; fw < st && fw < sh.W; ++fw) {
      Phase ph{fh, fw, ceil_div(sh.H - fh, st), ceil_div(sh.W - fw, st), taps.size(), 0};
      for (int k = 0; k < sh.K; ++k)
        for (int r = 0; r < sh.R; ++r)
          for (int s = 0; s < sh.S; ++s) {
            if ((fh + pad - r) % st != 0 || (fw + pad - s) % st != 0) continue;
            const Tap t{k, r, s, (fh + pad - r) / st, (fw + pad - s) / st};
            taps.push_back(t);
            min_row = std::min(min_row, t.row);
            max_row = std::max(max_row, t.row + round_up(ph.rows, rb) - 1);
            min_col = std::min(min_col, t.col);
            max_col = std::max(max_col, t.col + round_up(ceil_div(ph.cols, L), qb) * L - 1);
          }
      ph.count = taps.size() - ph.first;
      phases.push_back(ph);
    }

  // dy copied with margins of zeros wide enough for every tap and ghost lane.
  const int top = -min_row, left = -min_col;
  const int hd = top + max_row + 1, wd = round_up(left + max_col + 1, L);
  const ptrdiff_t dplane = ptrdiff_t(hd) * wd;
  ws.offsets.resize(taps.size());
  ws.wpack.assign(taps.size() * cblocks * ob, T(0));
  for (const Phase& ph : phases) {
    T* pack = ws.wpack.data() + ph.first * cblocks * ob;
    for (size_t e = 0; e < ph.count; ++e) {
      const Tap& t = taps[ph.first + e];
      ws.offsets[ph.first + e] = t.k * dplane + ptrdiff_t(t.row + top) * wd + t.col + left;
      for (int c = 0; c < sh.C; ++c)
        pack[(size_t(c / ob) * ph.count + e) * ob + c % ob] =
            w[((size_t(t.k) * sh.C + c) * sh.R + t.r) * sh.S + t.s];
    }
  }
  round_operands(ws.wpack.data(), ws.wpack.size(), prec);
  prepare(ws);

#pragma omp parallel
  {
    T* buf = grow_aligned(ws.in[thread_index()], size_t(sh.K) * dplane);
    std::fill(buf, buf + sh.K * dplane, T(0));  // the margins, once
#pragma omp for schedule(static)
    for (int n = 0; n < sh.N; ++n) {
      const T* dyn = dy + n * sh.out_sample();
      for (int k = 0; k < sh.K; ++k)
        for (int p = 0; p < sh.P; ++p)
          std::copy(dyn + (size_t(k) * sh.P + p) * sh.Q, dyn + (size_t(k) * sh.P + p + 1) * sh.Q,
                    buf + k * dplane + ptrdiff_t(p + top) * wd + left);
      round_operands(buf, size_t(sh.K) * dplane, prec);
      for (const Phase& ph : phases) {
        TileJob<T> jb;
        jb.in = buf;
        jb.in_row = wd;
        jb.off = ws.offsets.data() + ph.first;
        jb.n_entries = int(ph.count);
        jb.wpack = ws.wpack.data() + ph.first * cblocks * ob;
        jb.wpack_stride = ph.count * ob;
        jb.bias = nullptr;
        jb.accumulate = false;
        jb.n_out = sh.C;
        jb.rows = ph.rows;
        jb.cols = ph.cols;
        jb.out = dx + n * sh.in_sample() + ph.fh * sh.W + ph.fw;
        jb.out_ch = ptrdiff_t(sh.H) * sh.W;
        jb.out_row = ptrdiff_t(st) * sh.W;
        jb.out_col = st;
        jb.ob = ob;
        jb.qb = qb;
        kn.tiles(jb);
      }
    }
  }
}

// ---- backward params --------------------------------------------------------------

template <typename T>
void conv2d_thin_backward_params(const Conv2dShape& sh, const T* x, const T* dy, T* dw, T* db,
                                 Conv2dThinWorkspace<T>& ws, SimdLevel level, Precision prec) {
  using namespace thin_detail;
  const ThinKernels<T>& kn = kernels_for<T>(level);
  if constexpr (std::is_same_v<T, float>)
    if (prec == Precision::kBf16 && conv2d_thin_bf16_dot(sh, level))
      return thin_bf16::backward_params(sh, x, dy, dw, db, ws);
  const int L = kn.lanes;
  const int qb = tile_vectors(sh.Q, L), vectors = round_up(ceil_div(sh.Q, L), qb);
  const int kb = channel_block(sh.K), kblocks = ceil_div(sh.K, kb);
  const int group = wgrad_group(sh.N, sh.P, vectors, num_threads());
  const int groups = ceil_div(sh.N, group);
  const PaddedInput g = padded_input(sh, kn.tile_rows(kb, qb), qb, L, sizeof(T), group);
  const int taps = sh.R * sh.S, entries = sh.C * taps;
  // Ghost entries up to a whole tile of taps for any block size (≤ 8).
  tap_offsets(sh, g, g.chunk, size_t(g.chunk) * taps + 8, ws.offsets);
  const ptrdiff_t dy_row = ptrdiff_t(vectors) * L, dy_plane = sh.P * dy_row;
  const ptrdiff_t dy_image = sh.K * dy_plane, in_image = g.chunk * g.plane;
  const size_t wcount = sh.weight_count();
  prepare(ws);

#pragma omp parallel
  {
    const int t = thread_index();
    double* pdw = grow(ws.dw[t], wcount);
    double* pdb = grow(ws.db[t], size_t(sh.K));
    std::fill(pdw, pdw + wcount, 0.0);
    std::fill(pdb, pdb + sh.K, 0.0);
    ws.used[t] = 1;
    // dy with each row padded with zeros to whole tiles of vectors, and the
    // input's padding: zeroed once, then only the data is copied.
    T* dyq = grow_aligned(ws.aux[t], size_t(group) * dy_image);
    std::fill(dyq, dyq + group * dy_image, T(0));
    T* buf = grow_aligned(ws.in[t], size_t(group) * in_image);
    std::fill(buf, buf + group * in_image, T(0));
#pragma omp for schedule(static)
    for (int grp = 0; grp < groups; ++grp) {
      const int n0 = grp * group, ng = std::min(group, sh.N - n0);
      for (int i = 0; i < ng; ++i) {
        const T* dyn = dy + (n0 + i) * sh.out_sample();
        for (int k = 0; k < sh.K; ++k)
          for (int p = 0; p < sh.P; ++p)
            std::copy(dyn + (size_t(k) * sh.P + p) * sh.Q,
                      dyn + (size_t(k) * sh.P + p + 1) * sh.Q,
                      dyq + i * dy_image + k * dy_plane + p * dy_row);
        round_operands(dyq + i * dy_image, size_t(dy_image), prec);
        if (db)  // from dy itself: a sum, not a product, so FP32 in any precision
          for (int k = 0; k < sh.K; ++k) {
            const T* d = dyn + size_t(k) * sh.P * sh.Q;
            double acc = 0;
            for (int j = 0; j < sh.P * sh.Q; ++j) acc += double(d[j]);
            pdb[k] += acc;
          }
      }
      for (int c0 = 0; c0 < sh.C; c0 += g.chunk) {
        const int cn = std::min(g.chunk, sh.C - c0);
        for (int i = 0; i < ng; ++i)
          kn.copy_in(sh, g, x + (n0 + i) * sh.in_sample(), c0, cn, buf + i * in_image);
        round_operands(buf, size_t(ng) * in_image, prec);
        // Blocks of kb output channels (the last one may be smaller).
        for (int b = 0; b < kblocks; ++b) {
          const int k0 = b * kb;
          WgradJob<T> jb;
          jb.images = ng;
          jb.in_image = in_image;
          jb.dy_image = dy_image;
          jb.in = buf;
          jb.in_row = sh.stride * g.row;
          jb.off = ws.offsets.data();
          jb.n_entries = cn * taps;
          jb.dy = dyq + k0 * dy_plane;
          jb.dy_plane = dy_plane;
          jb.dy_row = dy_row;
          jb.k = std::min(kb, sh.K - k0);
          jb.rows = sh.P;
          jb.vectors = vectors;
          jb.qb = qb;
          jb.dw = pdw + size_t(k0) * entries + size_t(c0) * taps;
          jb.dw_k = entries;
          kn.wgrad(jb);
        }
      }
    }
  }

  add_partials(ws, wcount, sh.K, dw, db);
}

#define HPMC_THIN_INSTANTIATE(T)                                                                \
  template void conv2d_thin_forward<T>(const Conv2dShape&, const T*, const T*, const T*, T*,     \
                                       Conv2dThinWorkspace<T>&, SimdLevel, Precision);          \
  template void conv2d_thin_backward_data<T>(const Conv2dShape&, const T*, const T*, T*,         \
                                             Conv2dThinWorkspace<T>&, SimdLevel, Precision);    \
  template void conv2d_thin_backward_params<T>(const Conv2dShape&, const T*, const T*, T*, T*,   \
                                               Conv2dThinWorkspace<T>&, SimdLevel, Precision);
HPMC_THIN_INSTANTIATE(float)
HPMC_THIN_INSTANTIATE(double)
#undef HPMC_THIN_INSTANTIATE

}  // namespace hpmc::cpu
