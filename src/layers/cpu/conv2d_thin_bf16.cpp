// conv2d_thin_bf16.cpp — the thin convolutions' bf16 products on AVX512_BF16
// (conv2d_thin.h: conv2d_thin_bf16_dot): vdpbf16ps, two bf16 products added
// into each FP32 lane per instruction, where the FP32 kernels of
// conv2d_thin.cpp do one (on bf16-rounded copies). Stride 1 only; the
// operands are rounded to bf16 as they are copied (bf16.h's rule:
// vcvtneps2bf16), the sums are FP32, the weight gradient's partials double.
//
// A PAIR is two bf16 values in one 32-bit word, the first in the low half:
// vdpbf16ps multiplies pair by pair and adds both products into the lane.
// Each pass pairs along its reduction:
//   * forward, y[k][p][q] = b[k] + Σ_c,r,s w[k][c][r][s]·x[c][p−pad+r][q−pad+s]:
//     the input channels in pairs (c, c+1). Per image, chunks of channel
//     pairs are copied into planes of words (row h + pad, column v + pad
//     holds x[c][h][v] and x[c+1][h][v]; zeros around and past an odd C),
//     and the weights packed as words (w[k][c][r][s], w[k][c+1][r][s]). A
//     register tile of up to 4 output channels × rows × 16-pixel vectors
//     then sums, per entry (c pair, r, s), the shifted plane times the
//     broadcast weight word: conv2d_thin_kernels.inc's tile with pairs.
//   * backward_data, dx[c][h][v] = Σ_k,r,s w[k][c][r][s]·dy[k][h+pad−r][v+pad−s]:
//     the output channels in pairs (k, k+1), dy copied into planes of
//     words with margins of zeros wide enough for every tap; the same tile
//     over the input channels.
//   * backward_params, dw[k][c][r][s] += Σ_n,p,q dy[k][p][q]·x[c][p−pad+r][q−pad+s]:
//     the pixels in pairs (q, q+1). dy's rows and the padded input planes
//     are copied as plain bf16 (a row's 32 values are 16 pairs, whatever the
//     shift s); a tile of up to 4 output channels × up to 8 taps keeps its
//     sums in registers over a group of images, then adds each one's lanes
//     in double into the thread's partial. The partials are added in thread
//     order, as in conv2d_thin.cpp: a fixed thread count gives the same bits.
// Every element's sum runs in an order fixed by the shape alone.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "core/bf16gemm.h"
#include "core/error.h"
#include "core/threads.h"
#include "layers/cpu/conv2d_thin.h"
#include "layers/cpu/conv2d_thin_bf16.h"
#include "layers/cpu/conv2d_thin_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HPMC_THIN_BF16 1
#include <immintrin.h>
#else
#define HPMC_THIN_BF16 0
#endif

namespace hpmc::cpu {

bool conv2d_thin_bf16_dot(const Conv2dShape& sh, SimdLevel level) {
  return HPMC_THIN_BF16 && level == SimdLevel::kAvx512 && sh.stride == 1 && sh.C >= 1 &&
         sh.K >= 1 && bf16gemm_avx512_supported() && bf16gemm_path() != Bf16GemmPath::kFallback;
}

#if HPMC_THIN_BF16

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593), as in
// bf16gemm_avx512.cpp.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define HPMC_DOT __attribute__((target("avx512f,avx512vl,avx512bw,avx512bf16,avx2,fma")))
// An empty asm that takes v in a register: one load of an input vector for
// all the vdpbf16ps that use it, not one folded into each.
#define HPMC_IN_REGISTER(v) __asm__("" : "+v"(v))

namespace thin_bf16 {
namespace {

using thin_detail::ceil_div;
using thin_detail::channel_block;
using thin_detail::grow_aligned;
using thin_detail::kChunkBytes;
using thin_detail::round_up;

constexpr int kRegisters = 32;

// Rows of an ob-channel × qb-vector tile: as many as the registers hold
// beside the broadcast weights and an input, as a power of two, at most 8.
constexpr int tile_rows(int ob, int qb) {
  const int fit = (kRegisters - ob - 3) / (ob * qb);
  int p = 1;
  while (p * 2 <= fit && p < 8) p *= 2;
  return p;
}
// Taps per weight-gradient tile of k channels: k·taps sums beside k dy
// vectors and an input, at most 8 (the offset tables carry 8 ghost entries).
constexpr int wgrad_taps(int k) { return std::clamp((kRegisters - k - 3) / k, 1, 8); }

uint32_t pair(float lo, float hi) {
  return uint32_t(bf16_bits(lo)) | uint32_t(bf16_bits(hi)) << 16;
}

template <typename T>
void ensure_threads(std::vector<std::vector<T>>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// ---- kernels ----------------------------------------------------------------------

HPMC_DOT inline __mmask16 lanes_mask(int n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}
HPMC_DOT inline __mmask32 lanes_mask32(int n) {
  return n >= 32 ? __mmask32(0xffffffffu) : n <= 0 ? __mmask32(0) : __mmask32((1u << n) - 1);
}

// Rows of a (and b, or zeros where b is null; rows × cols floats, row stride
// lds) as pairs into dst: row i at dst + (i + top)·ldd + left. vcvtne2ps2bf16
// gives a's 16 values then b's, vpermw interleaves them.
HPMC_DOT void copy_pairs(const float* a, const float* b, int rows, int cols, ptrdiff_t lds,
                         uint32_t* dst, ptrdiff_t ldd, int top, int left) {
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int i = 0; i < rows; ++i) {
    const float* ra = a + i * lds;
    const float* rb = b ? b + i * lds : nullptr;
    uint32_t* d = dst + (i + top) * ldd + left;
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 m = lanes_mask(cols - j);
      const __m512 va = _mm512_maskz_loadu_ps(m, ra + j);
      const __m512 vb = rb ? _mm512_maskz_loadu_ps(m, rb + j) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(vb, va);
      _mm512_mask_storeu_epi32(d + j, m, _mm512_permutexvar_epi16(interleave, both));
    }
  }
}

// Rows of a (rows × cols floats, row stride lds) as bf16 into dst: row i at
// dst + (i + top)·ldd + left.
HPMC_DOT void copy_bf16(const float* a, int rows, int cols, ptrdiff_t lds, uint16_t* dst,
                        ptrdiff_t ldd, int top, int left) {
  for (int i = 0; i < rows; ++i) {
    const float* r = a + i * lds;
    uint16_t* d = dst + (i + top) * ldd + left;
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 m = lanes_mask(cols - j);
      _mm256_mask_storeu_epi16(d + j, m,
                               (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, r + j)));
    }
  }
}

// out[o][i][j] = init + Σ_e wpack[o/OB][e][o%OB] · in[off[e] + i·in_row + j]
// (pair products) for o < n_out, i < rows, j < cols, init the bias (0 where
// null) or out itself (accumulate).
struct DotJob {
  const uint32_t* in;
  ptrdiff_t in_row;
  const ptrdiff_t* off;
  int n_entries;
  const uint32_t* wpack;
  size_t wpack_stride;
  const float* bias;
  bool accumulate;
  int n_out, rows, cols;
  float* out;
  ptrdiff_t out_ch, out_row;
};

template <int OB, int RB, int QB>
HPMC_DOT void dot_tiles(const DotJob& jb) {
  const int vectors = ceil_div(jb.cols, 16);
  const ptrdiff_t in_row = jb.in_row;
  for (int o0 = 0; o0 < jb.n_out; o0 += OB) {
    const uint32_t* wblock = jb.wpack + size_t(o0 / OB) * jb.wpack_stride;
    const int n_o = std::min(OB, jb.n_out - o0);
    for (int i0 = 0; i0 < jb.rows; i0 += RB) {
      const int n_i = std::min(RB, jb.rows - i0);
      for (int j0 = 0; j0 < vectors; j0 += QB) {
        float* out = jb.out + o0 * jb.out_ch + i0 * jb.out_row + ptrdiff_t(j0) * 16;
        __mmask16 mk[QB];
        for (int j = 0; j < QB; ++j) mk[j] = lanes_mask(jb.cols - (j0 + j) * 16);
        __m512 acc[OB][RB][QB];
        for (int o = 0; o < OB; ++o)
          for (int i = 0; i < RB; ++i)
            for (int j = 0; j < QB; ++j) {
              if (!jb.accumulate)
                acc[o][i][j] = jb.bias && o < n_o ? _mm512_set1_ps(jb.bias[o0 + o])
                                                  : _mm512_setzero_ps();
              else if (o < n_o && i < n_i)
                acc[o][i][j] = _mm512_maskz_loadu_ps(
                    mk[j], out + o * jb.out_ch + i * jb.out_row + j * 16);
              else
                acc[o][i][j] = _mm512_setzero_ps();
            }
        const uint32_t* in = jb.in + i0 * in_row + j0 * 16;
        const uint32_t* wp = wblock;
        for (int e = 0; e < jb.n_entries; ++e, wp += OB) {
          const uint32_t* src = in + jb.off[e];
          __m512bh w[OB];
          for (int o = 0; o < OB; ++o) w[o] = (__m512bh)_mm512_set1_epi32(int(wp[o]));
          for (int i = 0; i < RB; ++i)
            for (int j = 0; j < QB; ++j) {
              __m512i x = _mm512_loadu_si512(src + i * in_row + j * 16);
              HPMC_IN_REGISTER(x);
              for (int o = 0; o < OB; ++o)
                acc[o][i][j] = _mm512_dpbf16_ps(acc[o][i][j], (__m512bh)x, w[o]);
            }
        }
        for (int o = 0; o < n_o; ++o)
          for (int i = 0; i < n_i; ++i)
            for (int j = 0; j < QB; ++j)
              _mm512_mask_storeu_ps(out + o * jb.out_ch + i * jb.out_row + j * 16, mk[j],
                                    acc[o][i][j]);
      }
    }
  }
}

HPMC_DOT void run_dot_tiles(const DotJob& jb, int ob, int qb) {
#define HPMC_DOT_TILE(OB, QB) \
  if (ob == OB && qb == QB) return dot_tiles<OB, tile_rows(OB, QB), QB>(jb);
  HPMC_DOT_TILE(1, 1) HPMC_DOT_TILE(1, 2)
  HPMC_DOT_TILE(2, 1) HPMC_DOT_TILE(2, 2)
  HPMC_DOT_TILE(3, 1) HPMC_DOT_TILE(3, 2)
  HPMC_DOT_TILE(4, 1) HPMC_DOT_TILE(4, 2)
#undef HPMC_DOT_TILE
  HPMC_CHECK(false, "no bf16 tile of ", ob, " channels x ", qb, " vectors");
}

// dw[k·dw_k + e] += Σ_g Σ_i Σ_v dy[g][k][i][v] · in[g][off[e] + i·in_row + v]
// for k < KB and every entry e, TB entries at a time; v runs over `vectors`
// vectors of 32 bf16 (16 pairs), dy 0 past the row's end. The offset table
// is padded past n_entries with readable ghost entries, whose sums are
// dropped.
struct DotWgradJob {
  int images;
  ptrdiff_t in_image, dy_image;
  const uint16_t* in;
  ptrdiff_t in_row;
  const ptrdiff_t* off;
  int n_entries;
  const uint16_t* dy;
  ptrdiff_t dy_plane, dy_row;
  int k, rows, vectors;
  double* dw;
  ptrdiff_t dw_k;
};

template <int KB, int TB>
HPMC_DOT void dot_wgrad(const DotWgradJob& jb) {
  for (int e0 = 0; e0 < jb.n_entries; e0 += TB) {
    ptrdiff_t off[TB];
    for (int t = 0; t < TB; ++t) off[t] = jb.off[e0 + t];
    __m512 acc[KB][TB];
    for (int k = 0; k < KB; ++k)
      for (int t = 0; t < TB; ++t) acc[k][t] = _mm512_setzero_ps();
    for (int g = 0; g < jb.images; ++g) {
      const uint16_t* x = jb.in + g * jb.in_image;
      const uint16_t* d = jb.dy + g * jb.dy_image;
      for (int i = 0; i < jb.rows; ++i, x += jb.in_row, d += jb.dy_row)
        for (int v = 0; v < jb.vectors; ++v) {
          __m512bh dv[KB];
          for (int k = 0; k < KB; ++k)
            dv[k] = (__m512bh)_mm512_loadu_si512(d + k * jb.dy_plane + v * 32);
          for (int t = 0; t < TB; ++t) {
            __m512i xv = _mm512_loadu_si512(x + off[t] + v * 32);
            HPMC_IN_REGISTER(xv);
            for (int k = 0; k < KB; ++k)
              acc[k][t] = _mm512_dpbf16_ps(acc[k][t], dv[k], (__m512bh)xv);
          }
        }
    }
    const int n_t = std::min(TB, jb.n_entries - e0);
    for (int k = 0; k < KB; ++k)
      for (int t = 0; t < n_t; ++t) {
        alignas(64) float lanes[16];
        _mm512_store_ps(lanes, acc[k][t]);
        double s = 0;
        for (int l = 0; l < 16; ++l) s += double(lanes[l]);
        jb.dw[k * jb.dw_k + e0 + t] += s;
      }
  }
}

HPMC_DOT void run_dot_wgrad(const DotWgradJob& jb) {
#define HPMC_DOT_WGRAD(KB) \
  if (jb.k == KB) return dot_wgrad<KB, wgrad_taps(KB)>(jb);
  HPMC_DOT_WGRAD(1) HPMC_DOT_WGRAD(2) HPMC_DOT_WGRAD(3) HPMC_DOT_WGRAD(4)
#undef HPMC_DOT_WGRAD
  HPMC_CHECK(false, "no bf16 weight-gradient tile of ", jb.k, " channels");
}

}  // namespace

// ---- forward ----------------------------------------------------------------------

void forward(const Conv2dShape& sh, const float* x, const float* w, const float* b, float* y,
             Conv2dThinWorkspace<float>& ws) {
  if (sh.N == 0 || sh.P == 0 || sh.Q == 0) return;
  const int ob = channel_block(sh.K);
  const int qb = ceil_div(sh.Q, 16) >= 2 ? 2 : 1;
  const int rb = tile_rows(ob, qb);
  const int cp = ceil_div(sh.C, 2), taps = sh.R * sh.S, entries = cp * taps;
  // Planes of words: round_up(P, rb) + R − 1 rows (the ghost rows of the
  // last tile), rows as long as whole tiles read.
  const int rows = round_up(sh.P, rb) + sh.R - 1;
  const ptrdiff_t row = round_up(round_up(ceil_div(sh.Q, 16), qb) * 16 + sh.S - 1, 16);
  const ptrdiff_t plane = rows * row;
  const int chunk = int(std::clamp<size_t>(kChunkBytes / (size_t(plane) * 4), 1, size_t(cp)));

  ws.offsets.assign(size_t(chunk) * taps, 0);
  for (int c = 0, e = 0; c < chunk; ++c)
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s) ws.offsets[e++] = c * plane + r * row + s;
  // [K / ob][entries][ob]: entry (c pair, r, s); zeros past C and K.
  const int kblocks = ceil_div(sh.K, ob);
  ws.wpairs.assign(size_t(kblocks) * entries * ob, 0u);
  for (int k = 0; k < sh.K; ++k)
    for (int c2 = 0; c2 < cp; ++c2)
      for (int rs = 0; rs < taps; ++rs) {
        const float* wk = w + size_t(k) * sh.C * taps;
        const float lo = wk[size_t(2 * c2) * taps + rs];
        const float hi = 2 * c2 + 1 < sh.C ? wk[size_t(2 * c2 + 1) * taps + rs] : 0.f;
        ws.wpairs[(size_t(k / ob) * entries + size_t(c2) * taps + rs) * ob + k % ob] =
            pair(lo, hi);
      }
  const size_t nt = size_t(std::max(num_threads(), 1));
  ensure_threads(ws.pairs, nt);

#pragma omp parallel
  {
    uint32_t* buf = grow_aligned(ws.pairs[thread_index()], size_t(chunk) * plane);
    std::fill(buf, buf + size_t(chunk) * plane, 0u);  // the padding, once
    const size_t hw = size_t(sh.H) * sh.W;
#pragma omp for schedule(static)
    for (int n = 0; n < sh.N; ++n)
      for (int c0 = 0; c0 < cp; c0 += chunk) {
        const int cn = std::min(chunk, cp - c0);
        const float* xn = x + n * sh.in_sample();
        for (int c = 0; c < cn; ++c) {
          const int ch = 2 * (c0 + c);
          copy_pairs(xn + ch * hw, ch + 1 < sh.C ? xn + (ch + 1) * hw : nullptr, sh.H, sh.W,
                     sh.W, buf + c * plane, row, sh.pad, sh.pad);
        }
        DotJob jb;
        jb.in = buf;
        jb.in_row = row;
        jb.off = ws.offsets.data();
        jb.n_entries = cn * taps;
        jb.wpack = ws.wpairs.data() + size_t(c0) * taps * ob;
        jb.wpack_stride = size_t(entries) * ob;
        jb.bias = b;
        jb.accumulate = c0 > 0;
        jb.n_out = sh.K;
        jb.rows = sh.P;
        jb.cols = sh.Q;
        jb.out = y + n * sh.out_sample();
        jb.out_ch = ptrdiff_t(sh.P) * sh.Q;
        jb.out_row = sh.Q;
        run_dot_tiles(jb, ob, qb);
      }
  }
}

// ---- backward data ------------------------------------------------------------------

void backward_data(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                   Conv2dThinWorkspace<float>& ws) {
  if (sh.N == 0 || sh.H == 0 || sh.W == 0) return;
  const int ob = channel_block(sh.C);
  const int qb = ceil_div(sh.W, 16) >= 2 ? 2 : 1;
  const int rb = tile_rows(ob, qb);
  const int kp = ceil_div(sh.K, 2), taps = sh.R * sh.S, entries = kp * taps;
  // dy[k][p][q] at row p + top, column q + left of its pair's plane; dx
  // (h, v) reads row h + pad − r + top ≥ 0 and column v + pad − s + left ≥ 0,
  // up to the ghost rows and lanes of whole tiles; zeros wherever dy is not.
  const int top = sh.R - 1, left = sh.S - 1;
  const int hd = std::max(round_up(sh.H, rb) + sh.pad + top, sh.P + top);
  const ptrdiff_t wd =
      round_up(std::max(round_up(ceil_div(sh.W, 16), qb) * 16 + sh.pad + left, sh.Q + left), 16);
  const ptrdiff_t dplane = hd * wd;

  ws.offsets.assign(size_t(entries), 0);
  for (int k = 0, e = 0; k < kp; ++k)
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s)
        ws.offsets[e++] = k * dplane + (sh.pad - r + top) * wd + (sh.pad - s + left);
  // [C / ob][entries][ob]: entry (k pair, r, s); zeros past K and C.
  const int cblocks = ceil_div(sh.C, ob);
  ws.wpairs.assign(size_t(cblocks) * entries * ob, 0u);
  for (int c = 0; c < sh.C; ++c)
    for (int k2 = 0; k2 < kp; ++k2)
      for (int rs = 0; rs < taps; ++rs) {
        const float lo = w[(size_t(2 * k2) * sh.C + c) * taps + rs];
        const float hi = 2 * k2 + 1 < sh.K ? w[(size_t(2 * k2 + 1) * sh.C + c) * taps + rs] : 0.f;
        ws.wpairs[(size_t(c / ob) * entries + size_t(k2) * taps + rs) * ob + c % ob] =
            pair(lo, hi);
      }
  const size_t nt = size_t(std::max(num_threads(), 1));
  ensure_threads(ws.pairs, nt);

#pragma omp parallel
  {
    uint32_t* buf = grow_aligned(ws.pairs[thread_index()], size_t(kp) * dplane);
    std::fill(buf, buf + size_t(kp) * dplane, 0u);  // the margins, once
    const size_t pq = size_t(sh.P) * sh.Q;
#pragma omp for schedule(static)
    for (int n = 0; n < sh.N; ++n) {
      const float* dyn = dy + n * sh.out_sample();
      for (int k = 0; k < kp; ++k)
        copy_pairs(dyn + 2 * k * pq, 2 * k + 1 < sh.K ? dyn + (2 * k + 1) * pq : nullptr, sh.P,
                   sh.Q, sh.Q, buf + k * dplane, wd, top, left);
      DotJob jb;
      jb.in = buf;
      jb.in_row = wd;
      jb.off = ws.offsets.data();
      jb.n_entries = entries;
      jb.wpack = ws.wpairs.data();
      jb.wpack_stride = size_t(entries) * ob;
      jb.bias = nullptr;
      jb.accumulate = false;
      jb.n_out = sh.C;
      jb.rows = sh.H;
      jb.cols = sh.W;
      jb.out = dx + n * sh.in_sample();
      jb.out_ch = ptrdiff_t(sh.H) * sh.W;
      jb.out_row = sh.W;
      run_dot_tiles(jb, ob, qb);
    }
  }
}

// ---- backward params ----------------------------------------------------------------

void backward_params(const Conv2dShape& sh, const float* x, const float* dy, float* dw,
                     float* db, Conv2dThinWorkspace<float>& ws) {
  const int kb = channel_block(sh.K), kblocks = ceil_div(sh.K, kb);
  const int vectors = ceil_div(sh.Q, 32);  // 32 pixels (16 pairs) a vector
  const int nt = std::max(num_threads(), 1);
  const int group = thin_detail::wgrad_group(sh.N, sh.P, vectors, nt);
  const int groups = ceil_div(sh.N, group);
  // Input planes of bf16: x[c][h][v] at row h + pad, column v + pad; rows
  // and columns as far as the taps reach from every output and lane.
  const ptrdiff_t row = round_up(vectors * 32 + sh.S - 1, 32);
  const ptrdiff_t plane = ptrdiff_t(sh.P + sh.R - 1) * row;
  const int chunk =
      int(std::clamp<size_t>(kChunkBytes / (size_t(plane) * 2 * group), 1, size_t(sh.C)));
  const int taps = sh.R * sh.S, entries = sh.C * taps;
  ws.offsets.assign(size_t(chunk) * taps + 8, 0);  // 8 ghost entries
  for (int c = 0, e = 0; c < chunk; ++c)
    for (int r = 0; r < sh.R; ++r)
      for (int s = 0; s < sh.S; ++s) ws.offsets[e++] = c * plane + r * row + s;
  const ptrdiff_t dy_row = ptrdiff_t(vectors) * 32, dy_plane = sh.P * dy_row;
  const ptrdiff_t dy_image = sh.K * dy_plane, in_image = chunk * plane;
  const size_t wcount = sh.weight_count();
  ensure_threads(ws.dw, size_t(nt));
  ensure_threads(ws.db, size_t(nt));
  ensure_threads(ws.halves, size_t(nt));
  ensure_threads(ws.halves_aux, size_t(nt));
  ws.used.assign(size_t(nt), 0);

#pragma omp parallel
  {
    const int t = thread_index();
    std::vector<double>& pdw = ws.dw[t];
    std::vector<double>& pdb = ws.db[t];
    pdw.assign(wcount, 0.0);
    pdb.assign(size_t(sh.K), 0.0);
    ws.used[t] = 1;
    uint16_t* dyq = grow_aligned(ws.halves_aux[t], size_t(group) * dy_image);
    std::fill(dyq, dyq + group * dy_image, uint16_t(0));
    uint16_t* buf = grow_aligned(ws.halves[t], size_t(group) * in_image);
    std::fill(buf, buf + group * in_image, uint16_t(0));
    const size_t pq = size_t(sh.P) * sh.Q, hw = size_t(sh.H) * sh.W;
#pragma omp for schedule(static)
    for (int grp = 0; grp < groups; ++grp) {
      const int n0 = grp * group, ng = std::min(group, sh.N - n0);
      for (int i = 0; i < ng; ++i) {
        const float* dyn = dy + (n0 + i) * sh.out_sample();
        for (int k = 0; k < sh.K; ++k)
          copy_bf16(dyn + k * pq, sh.P, sh.Q, sh.Q, dyq + i * dy_image + k * dy_plane, dy_row, 0,
                    0);
        if (db)  // from dy itself: a sum, not a product, so FP32 in any precision
          for (int k = 0; k < sh.K; ++k) {
            const float* d = dyn + k * pq;
            double acc = 0;
            for (size_t j = 0; j < pq; ++j) acc += double(d[j]);
            pdb[k] += acc;
          }
      }
      for (int c0 = 0; c0 < sh.C; c0 += chunk) {
        const int cn = std::min(chunk, sh.C - c0);
        for (int i = 0; i < ng; ++i) {
          const float* xn = x + (n0 + i) * sh.in_sample();
          for (int c = 0; c < cn; ++c)
            copy_bf16(xn + (c0 + c) * hw, sh.H, sh.W, sh.W,
                      buf + i * in_image + c * plane, row, sh.pad, sh.pad);
        }
        for (int bk = 0; bk < kblocks; ++bk) {
          const int k0 = bk * kb;
          DotWgradJob jb;
          jb.images = ng;
          jb.in_image = in_image;
          jb.dy_image = dy_image;
          jb.in = buf;
          jb.in_row = row;
          jb.off = ws.offsets.data();
          jb.n_entries = cn * taps;
          jb.dy = dyq + k0 * dy_plane;
          jb.dy_plane = dy_plane;
          jb.dy_row = dy_row;
          jb.k = std::min(kb, sh.K - k0);
          jb.rows = sh.P;
          jb.vectors = vectors;
          jb.dw = pdw.data() + size_t(k0) * entries + size_t(c0) * taps;
          jb.dw_k = entries;
          run_dot_wgrad(jb);
        }
      }
    }
  }

  thin_detail::add_partials(ws, wcount, sh.K, dw, db);
}

}  // namespace thin_bf16

#undef HPMC_IN_REGISTER
#undef HPMC_DOT

#else  // !HPMC_THIN_BF16

namespace thin_bf16 {
void forward(const Conv2dShape&, const float*, const float*, const float*, float*,
             Conv2dThinWorkspace<float>&) {
  HPMC_CHECK(false, "the AVX512_BF16 thin kernels are not built for this machine");
}
void backward_data(const Conv2dShape&, const float*, const float*, float*,
                   Conv2dThinWorkspace<float>&) {
  HPMC_CHECK(false, "the AVX512_BF16 thin kernels are not built for this machine");
}
void backward_params(const Conv2dShape&, const float*, const float*, float*, float*,
                     Conv2dThinWorkspace<float>&) {
  HPMC_CHECK(false, "the AVX512_BF16 thin kernels are not built for this machine");
}
}  // namespace thin_bf16

#endif  // HPMC_THIN_BF16

}  // namespace hpmc::cpu
