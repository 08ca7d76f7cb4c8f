// conv2d_thin.cu — convolutions with K ≤ 4 output channels for the im2col
// family (the last layer of an autoencoder: 256 → 3 channels at 32×32). As a
// GEMM such a layer is 4 columns wide (forward) or 4 rows tall (weight
// gradient), which the tiled engine covers with mostly idle 16-wide tiles; here
// every thread keeps all K channels of its outputs (or of its weight-gradient
// terms) in registers instead, and the weights come from shared memory as one
// float4 per tap (the K channels of w[.][c][r][s], padded to 4), the same
// address for a whole warp: a broadcast. FP32 FFMA only, no atomics:
// every sum has a fixed order, so results repeat bit for bit.
//
// Layouts: x NCHW, w KCRS, y NKPQ (as conv2d_kernels.h).
//
// ---- kFast3x3, kFast5x5: R × R (R = 3, 5), stride 1, pad R/2 (P = H, Q = W), -----
// ---- W % 4 == 0, aligned ------------------------------------------------------------
// A warp covers 32 columns: lane = 8·ty + tx owns columns q0+4·tx .. +3 of
// rows set by ty. One row of the window of its 4 columns is 4 + 2·HALO values
// (HALO = R/2): its own float4 plus the last HALO elements of lane tx−1's and
// the first HALO of lane tx+1's (shuffles); lanes tx = 0 and 7 load those
// outer values themselves (zero at the image border). Rows outside [0, H) and
// columns ≥ W read as zero.
//   forward  block = (n, 8 rows × 32 columns); its 8 warps split C into 8
//            contiguous ranges; lane rows 2·ty, 2·ty+1 (window rows R + 1), all
//            K; each warp stages its channels' weights in rounds of 144 / R²
//            channels (16 of 3×3, 5 of 5×5); the 8 partial tiles are summed in
//            shared memory, warp 0 first, then + b. Next channel's rows are
//            loaded while this one computes.
//   backward_data  dx[c][h][w] = Σ_k,r,s dy[k][h+HALO−r][w+HALO−s]·w[k][c][r][s]:
//            warp = 4 rows × 32 columns of one image (lane row ty), its dy
//            window (K × R rows × 4 + 2·HALO) held in registers; block = 8 such
//            warps × 32 channels (blockIdx.y), weights staged once per block;
//            per channel R² float4 weight reads, 4·R²·K FFMA, one float4 store.
//   backward_params  block = 4 channels (one per warp) × one slice of the
//            image tiles (8 rows × 32 columns; lane rows 2·ty, 2·ty+1); each
//            lane sums its R²·K terms over the slice's tiles (next tile loaded
//            while this one computes), then a shuffle tree; the warp of
//            channel 0 also sums dy for db. Slices go to a workspace.
// Every sum takes its terms r by r, then s by s.
//
// ---- kGeneric: any R, S (R·S ≤ kThinMaxTaps), stride, pad, W -----------------
//   forward  block = 128 consecutive output pixels m = (n, p, q), 4 per lane
//            (m0 + lane + 32·v), the 8 warps splitting C as above; scalar loads.
//   backward_data  thread = one input pixel × 8 channels (blockIdx.y), gather
//            over the taps whose output position divides exactly by the stride.
//   backward_params  block = 8 (c, r, s) columns × one slice of the N·P·Q
//            pixels; thread = strided pixels, 8 × 4 sums; shuffle tree, then the
//            8 warps in order.
// K is padded to 4 with zero weights; only k < K is read or written.
//
// ---- the weight-gradient slices (every path) -------------------------------
// Slice z writes every one of its partial sums to ws[z·stride + i], i = k·C·R·S
// + c·R·S + r·S + s for dw and K·C·R·S + k for db (zeros for an empty slice), and
// thin_reduce_kernel adds dw[i] += Σ_z ws[z·stride + i] in double, z ascending.
// The slicing (choose_thin_splits, implicit_plan.h) depends on the shape only.
#include "layers/gpu/conv2d_thin.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/implicit_fastdiv.h"

namespace hpmc::gpu::implicit_detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr unsigned kFull = 0xffffffffu;
// Weight slots (float4: the K channels of one tap) per warp in the forward
// kernels: 16 channels of 3×3, or kWarpTaps / (R·S) ≥ 2 channels in general.
constexpr int kWarpTaps = 144;
static_assert(kWarpTaps / kThinMaxTaps >= 1, "one channel's taps fit a warp's slots");
constexpr int kDgradChannels = 32;  // kFast backward_data: channels per block
// kFast backward_params: warps (= channels) per block. Its blocks never
// synchronize; 128 threads and 3 blocks per SM (2 for 5×5 with K ≥ 2:
// thin_fast_wgrad_blocks_per_sm) leave each thread the registers that its
// sums and two tiles' loads (this one's and the next one's) need.
constexpr int kWgradWarps = 4;
constexpr int kGenChannels = 8;     // kGeneric backward_data: channels per thread
constexpr int kGenColumns = 8;      // kGeneric backward_params: (c, r, s) columns per block
constexpr int kFastTilesMin = 4;    // kFast backward_params: tiles per slice, at least
constexpr int kGenPixelsMin = 2048; // kGeneric backward_params: pixels per slice, at least

struct ThinArgs {
  int N, C, H, W, K, R, S, stride, pad, P, Q;
  int RS, HW, PQ, CRS, CHW, KPQ, NPQ, NHW;  // the host checks each is < 2^30
  FastDiv fRS, fS, fHW, fW, fPQ, fQ, fStride;
  // kFast tiles: 32-column tiles per row, 8- and 4-row tiles per image
  FastDiv fTW, fTH8, fTH4;
};

ThinArgs make_thin_args(const Conv2dShape& s) {
  ThinArgs a{};
  a.N = s.N, a.C = s.C, a.H = s.H, a.W = s.W, a.K = s.K, a.R = s.R, a.S = s.S;
  a.stride = s.stride, a.pad = s.pad, a.P = s.P, a.Q = s.Q;
  a.RS = s.R * s.S;
  a.HW = s.H * s.W;
  a.PQ = s.P * s.Q;
  a.CRS = s.C * a.RS;
  a.CHW = s.C * a.HW;
  a.KPQ = s.K * a.PQ;
  a.NPQ = s.N * a.PQ;
  a.NHW = s.N * a.HW;
  a.fRS = FastDiv(a.RS);
  a.fS = FastDiv(s.S);
  a.fHW = FastDiv(a.HW);
  a.fW = FastDiv(s.W);
  a.fPQ = FastDiv(a.PQ);
  a.fQ = FastDiv(s.Q);
  a.fStride = FastDiv(s.stride);
  a.fTW = FastDiv((s.W + 31) / 32);
  a.fTH8 = FastDiv((s.H + 7) / 8);
  a.fTH4 = FastDiv((s.H + 3) / 4);
  return a;
}

// Component k of v; k is a constant after unrolling, so this folds away.
__device__ __forceinline__ float comp(const float4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;  // the same bits in every lane: a + b == b + a
}

// ---- kFast helpers (R × R windows, R = 3 or 5) --------------------------------------------

// The fast path's window: R × R taps, pad HALO = R / 2, so a lane's 4 columns
// need HALO more on each side.
template <int R>
struct FastWin {
  static_assert(R == 3 || R == 5, "the fast thin kernels take 3x3 and 5x5 windows");
  static constexpr int kHalo = R / 2;
  static constexpr int kTaps = R * R;
  static constexpr int kRowVals = 4 + 2 * kHalo;  // a row of the window of 4 columns
};

// One row of a lane's window before the exchange with its neighbours: the
// float4 at columns col .. col+3 and, for lanes tx = 0 / 7, the HALO outer
// columns from ecol = q0 − HALO / q0 + 32 (kNoEdge for the other lanes). Zero
// outside the plane; W % 4 == 0, so a float4 lies wholly inside or outside a row.
template <int HALO>
struct Row {
  float4 v;
  float e[HALO];
};

constexpr int kNoEdge = -(1 << 29);  // + HALO stays negative: never read

template <int HALO>
__device__ __forceinline__ Row<HALO> load_row(const float* __restrict__ plane, int h, int H,
                                              int W, int col, int ecol) {
  Row<HALO> r;
  r.v = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int i = 0; i < HALO; ++i) r.e[i] = 0.f;
  if ((unsigned)h < (unsigned)H) {
    const float* row = plane + h * W;
    if (col < W) r.v = __ldg(reinterpret_cast<const float4*>(row + col));
#pragma unroll
    for (int i = 0; i < HALO; ++i)
      if ((unsigned)(ecol + i) < (unsigned)W) r.e[i] = __ldg(row + ecol + i);
  }
  return r;
}

// Columns col − HALO .. col + 3 + HALO of the row. Lanes tx ± 1 of the same
// 8-lane group hold the same row (their h depends on ty only); a masked
// neighbour (its columns ≥ W) holds zeros, which is the padding. Every lane of
// the warp must call this together.
template <int HALO>
__device__ __forceinline__ void expand(const Row<HALO>& r, int tx, float (&v)[4 + 2 * HALO]) {
#pragma unroll
  for (int i = 0; i < HALO; ++i) {
    const float left = __shfl_up_sync(kFull, comp(r.v, 4 - HALO + i), 1);
    const float right = __shfl_down_sync(kFull, comp(r.v, i), 1);
    v[i] = tx == 0 ? r.e[i] : left;
    v[4 + HALO + i] = tx == 7 ? r.e[i] : right;
  }
  v[HALO] = r.v.x;
  v[HALO + 1] = r.v.y;
  v[HALO + 2] = r.v.z;
  v[HALO + 3] = r.v.w;
}

template <int HALO>
__device__ __forceinline__ int edge_col(int tx, int q0) {
  return tx == 0 ? q0 - HALO : (tx == 7 ? q0 + 32 : kNoEdge);
}

// ---- kFast forward ----------------------------------------------------------------------

template <int KC>
union FwdFastSmem {
  float4 wt[kWarps][kWarpTaps];  // each warp's staged weights: [channel][tap] → K channels
  float red[kWarps][KC][8][32];  // each warp's partial output tile
};

// Registers: the window's R + 1 rows as loaded, two of them expanded, and 2·KC
// float4 accumulators: two blocks an SM for 5×5 too.
template <int R, int KC>
__global__ void __launch_bounds__(kThreads, 2)
    thin_fwd_fast_kernel(const __grid_constant__ ThinArgs a, const float* __restrict__ x,
                         const float* __restrict__ w, const float* __restrict__ b,
                         float* __restrict__ y) {
  using Win = FastWin<R>;
  constexpr int HALO = Win::kHalo, TAPS = Win::kTaps, ROWS = R + 1;
  constexpr int CH = kWarpTaps / TAPS;  // channels per staging round
  __shared__ __align__(16) FwdFastSmem<KC> sm;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, ty = lane >> 3, tx = lane & 7;
  int rest, ct, rt, n;
  a.fTW.divmod(blockIdx.x, rest, ct);
  a.fTH8.divmod(rest, n, rt);
  const int p0 = rt * 8, q0 = ct * 32;
  const int col = q0 + 4 * tx, ecol = edge_col<HALO>(tx, q0);
  const int hbase = p0 + 2 * ty - HALO;  // input row of window row 0
  const int cw = (a.C + kWarps - 1) / kWarps;
  const int cbeg = min(a.C, warp * cw), cend = min(a.C, cbeg + cw);
  const float* xn = x + (size_t)n * a.CHW;

  float acc[2][KC][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int k = 0; k < KC; ++k)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][k][q] = 0.f;

  Row<HALO> nxt[ROWS];
  if (cbeg < cend) {
#pragma unroll
    for (int j = 0; j < ROWS; ++j)
      nxt[j] = load_row<HALO>(xn + (size_t)cbeg * a.HW, hbase + j, a.H, a.W, col, ecol);
  }
  float4* wt = sm.wt[warp];
  int cl = CH;  // channel c's staging slot; CH starts a staging round
  for (int c = cbeg; c < cend; ++c, ++cl) {
    if (cl == CH) {  // warp-uniform
      __syncwarp();  // the previous round's reads are done
      const int nch = min(CH, cend - c);
      float* wf = reinterpret_cast<float*>(wt);
#pragma unroll
      for (int k = 0; k < KC; ++k)
        for (int e = lane; e < nch * TAPS; e += 32)  // slot e = (c' − c)·TAPS + tap
          wf[e * 4 + k] = __ldg(w + ((size_t)k * a.C + c) * TAPS + e);
      __syncwarp();
      cl = 0;
    }
    // Window row j is expanded as it is first used, and its slot in nxt then
    // loads the next channel's row j: two expanded rows live at a time.
    const bool more = c + 1 < cend;  // warp-uniform
    const float* xnext = xn + (size_t)(c + 1) * a.HW;
    float va[Win::kRowVals], vb[Win::kRowVals];
    expand<HALO>(nxt[0], tx, va);
    if (more) nxt[0] = load_row<HALO>(xnext, hbase, a.H, a.W, col, ecol);
    // Each sum takes its terms r by r, then s by s: output row i sees window row r + i.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      expand<HALO>(nxt[r + 1], tx, vb);
      if (more) nxt[r + 1] = load_row<HALO>(xnext, hbase + r + 1, a.H, a.W, col, ecol);
      float4 wv[R];
#pragma unroll
      for (int s = 0; s < R; ++s) wv[s] = wt[cl * TAPS + r * R + s];
#pragma unroll
      for (int s = 0; s < R; ++s)
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int k = 0; k < KC; ++k) {
            acc[0][k][q] = fmaf(va[q + s], comp(wv[s], k), acc[0][k][q]);
            acc[1][k][q] = fmaf(vb[q + s], comp(wv[s], k), acc[1][k][q]);
          }
#pragma unroll
      for (int u = 0; u < Win::kRowVals; ++u) va[u] = vb[u];
    }
  }

  __syncthreads();  // every warp is done with its weights: reuse the space
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int k = 0; k < KC; ++k)
      *reinterpret_cast<float4*>(&sm.red[warp][k][2 * ty + i][4 * tx]) =
          make_float4(acc[i][k][0], acc[i][k][1], acc[i][k][2], acc[i][k][3]);
  __syncthreads();
  const int row = threadIdx.x >> 5, cc = threadIdx.x & 31;
  const int p = p0 + row, q = q0 + cc;
  if (p < a.H && q < a.W) {
#pragma unroll
    for (int k = 0; k < KC; ++k) {
      float s = 0.f;
#pragma unroll
      for (int u = 0; u < kWarps; ++u) s += sm.red[u][k][row][cc];
      if (b) s += __ldg(b + k);
      y[((size_t)n * KC + k) * a.HW + p * a.W + q] = s;
    }
  }
}

// ---- kFast backward_data ----------------------------------------------------------------

// Registers: the dy window, KC × R rows of 4 + 2·HALO values (120 for 5×5, K = 3).
template <int R, int KC>
__global__ void __launch_bounds__(kThreads, R == 3 ? 2 : 1)
    thin_dgrad_fast_kernel(const __grid_constant__ ThinArgs a, const float* __restrict__ dy,
                           const float* __restrict__ w, float* __restrict__ dx, int tiles) {
  using Win = FastWin<R>;
  constexpr int HALO = Win::kHalo, TAPS = Win::kTaps;
  constexpr int CB = kDgradChannels;
  __shared__ __align__(16) float4 wt[CB * TAPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, ty = lane >> 3, tx = lane & 7;
  const int t = blockIdx.x * kWarps + warp;
  const bool active = t < tiles;  // warp-uniform
  int rest, ct, rt, n;
  a.fTW.divmod(active ? t : 0, rest, ct);
  a.fTH4.divmod(rest, n, rt);
  const int h = rt * 4 + ty, q0 = ct * 32;
  const int col = q0 + 4 * tx, ecol = edge_col<HALO>(tx, q0);

  // d[k][j][u] = dy[n][k][h − HALO + j][col − HALO + u]
  float d[KC][R][Win::kRowVals];
#pragma unroll
  for (int k = 0; k < KC; ++k)
#pragma unroll
    for (int j = 0; j < R; ++j) {
      Row<HALO> r;
      r.v = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int i = 0; i < HALO; ++i) r.e[i] = 0.f;
      if (active)
        r = load_row<HALO>(dy + ((size_t)n * KC + k) * a.HW, h - HALO + j, a.H, a.W, col, ecol);
      expand<HALO>(r, tx, d[k][j]);
    }
  const bool store = active && h < a.H && col < a.W;

  for (int c0 = blockIdx.y * CB; c0 < a.C; c0 += gridDim.y * CB) {  // block-uniform
    const int nch = min(CB, a.C - c0);
    __syncthreads();  // the previous round's reads are done
    float* wf = reinterpret_cast<float*>(wt);
#pragma unroll
    for (int k = 0; k < KC; ++k)
      for (int e = threadIdx.x; e < nch * TAPS; e += kThreads)
        wf[e * 4 + k] = __ldg(w + ((size_t)k * a.C + c0) * TAPS + e);
    __syncthreads();
    if (!store) continue;
    float* out = dx + ((size_t)n * a.C + c0) * a.HW + h * a.W + col;
    for (int cl = 0; cl < nch; ++cl, out += a.HW) {
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int s = 0; s < R; ++s) {
          const float4 wv = wt[cl * TAPS + r * R + s];
#pragma unroll
          for (int q = 0; q < 4; ++q)
#pragma unroll
            for (int k = 0; k < KC; ++k)
              acc[q] = fmaf(d[k][R - 1 - r][q + R - 1 - s], comp(wv, k), acc[q]);
        }
      *reinterpret_cast<float4*>(out) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    }
  }
}

// ---- kFast backward_params --------------------------------------------------------------

template <int R, int KC>
struct WgradFastLoads {
  float4 g[KC][2];            // dy[n][k][p0 + 2·ty + i][col .. col+3]
  Row<R / 2> xr[R + 1];       // x[n][c][p0 + 2·ty − HALO + j][...]
};

template <int R, int KC>
__device__ __forceinline__ void wgrad_fast_load(const ThinArgs& a, const float* __restrict__ x,
                                                const float* __restrict__ dy, int c, int t,
                                                int ty, int tx, WgradFastLoads<R, KC>& L) {
  constexpr int HALO = R / 2;
  int rest, ct, rt, n;
  a.fTW.divmod(t, rest, ct);
  a.fTH8.divmod(rest, n, rt);
  const int q0 = ct * 32, col = q0 + 4 * tx, prow = rt * 8 + 2 * ty;
#pragma unroll
  for (int k = 0; k < KC; ++k)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float4 g = make_float4(0.f, 0.f, 0.f, 0.f);
      if (prow + i < a.H && col < a.W)
        g = __ldg(reinterpret_cast<const float4*>(dy + ((size_t)n * KC + k) * a.HW +
                                                  (prow + i) * a.W + col));
      L.g[k][i] = g;
    }
  const float* plane = x + ((size_t)n * a.C + c) * a.HW;
#pragma unroll
  for (int j = 0; j < R + 1; ++j)
    L.xr[j] = load_row<HALO>(plane, prow - HALO + j, a.H, a.W, col, edge_col<HALO>(tx, q0));
}

// Registers: KC × R·R sums and two tiles' loads (75 + 2 × 60 for 5×5, K = 3).
template <int R, int KC>
__global__ void __launch_bounds__(kWgradWarps * 32, thin_fast_wgrad_blocks_per_sm(R, KC))
    thin_wgrad_fast_kernel(const __grid_constant__ ThinArgs a, const float* __restrict__ x,
                           const float* __restrict__ dy, int tiles, int per,
                           float* __restrict__ ws, long long ws_stride, bool with_db) {
  using Win = FastWin<R>;
  constexpr int HALO = Win::kHalo, TAPS = Win::kTaps;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, ty = lane >> 3, tx = lane & 7;
  const int c = blockIdx.x * kWgradWarps + warp;
  if (c >= a.C) return;  // warp-uniform; this kernel has no block barrier
  const bool do_db = with_db && c == 0;
  const int t0 = blockIdx.y * per, t1 = min(tiles, t0 + per);

  float acc[KC][TAPS], dsum[KC];
#pragma unroll
  for (int k = 0; k < KC; ++k) {
    dsum[k] = 0.f;
#pragma unroll
    for (int u = 0; u < TAPS; ++u) acc[k][u] = 0.f;
  }
  WgradFastLoads<R, KC> nxt;
  if (t0 < t1) wgrad_fast_load<R, KC>(a, x, dy, c, t0, ty, tx, nxt);
  for (int t = t0; t < t1; ++t) {
    const WgradFastLoads<R, KC> cur = nxt;
    if (t + 1 < t1) wgrad_fast_load<R, KC>(a, x, dy, c, t + 1, ty, tx, nxt);
    if (do_db) {
#pragma unroll
      for (int k = 0; k < KC; ++k)
#pragma unroll
        for (int i = 0; i < 2; ++i)
          dsum[k] += cur.g[k][i].x + cur.g[k][i].y + cur.g[k][i].z + cur.g[k][i].w;
    }
#pragma unroll
    for (int j = 0; j < R + 1; ++j) {
      float v[Win::kRowVals];
      expand<HALO>(cur.xr[j], tx, v);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = j - i;
        if (r < 0 || r >= R) continue;
#pragma unroll
        for (int s = 0; s < R; ++s)
#pragma unroll
          for (int q = 0; q < 4; ++q)
#pragma unroll
            for (int k = 0; k < KC; ++k)
              acc[k][r * R + s] = fmaf(comp(cur.g[k][i], q), v[q + s], acc[k][r * R + s]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < KC; ++k) {
#pragma unroll
    for (int u = 0; u < TAPS; ++u) acc[k][u] = warp_sum(acc[k][u]);
    if (do_db) dsum[k] = warp_sum(dsum[k]);
  }
  if (lane == 0) {
    float* out = ws + blockIdx.y * ws_stride;
#pragma unroll
    for (int k = 0; k < KC; ++k) {
#pragma unroll
      for (int u = 0; u < TAPS; ++u) out[(size_t)k * a.CRS + c * TAPS + u] = acc[k][u];
      if (do_db) out[(size_t)KC * a.CRS + k] = dsum[k];
    }
  }
}

// ---- kGeneric forward ---------------------------------------------------------------------

union FwdGenSmem {
  float4 wt[kWarps][kWarpTaps];
  float red[kWarps][4][128];
};

__global__ void __launch_bounds__(kThreads, 2)
    thin_fwd_generic_kernel(const __grid_constant__ ThinArgs a, const float* __restrict__ x,
                            const float* __restrict__ w, const float* __restrict__ b,
                            float* __restrict__ y) {
  __shared__ __align__(16) FwdGenSmem sm;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int m0 = blockIdx.x * 128;
  bool ok[4];
  int hb[4], wb[4];
  const float* xb[4];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const int m = m0 + lane + 32 * v;
    ok[v] = m < a.NPQ;
    int n, pq, p, q;
    a.fPQ.divmod(ok[v] ? m : 0, n, pq);
    a.fQ.divmod(pq, p, q);
    hb[v] = p * a.stride - a.pad;
    wb[v] = q * a.stride - a.pad;
    xb[v] = x + (size_t)n * a.CHW;
  }
  const int cw = (a.C + kWarps - 1) / kWarps;
  const int cbeg = min(a.C, warp * cw), cend = min(a.C, cbeg + cw);
  const int CH = kWarpTaps / a.RS;  // ≥ 2: R·S ≤ kThinMaxTaps

  float acc[4][4];
#pragma unroll
  for (int v = 0; v < 4; ++v)
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[v][k] = 0.f;
  float4* wt = sm.wt[warp];
  int cl = CH;
  for (int c = cbeg; c < cend; ++c, ++cl) {
    if (cl == CH) {  // warp-uniform
      __syncwarp();
      const int nch = min(CH, cend - c);
      float* wf = reinterpret_cast<float*>(wt);
      // e = slot·4 + k with slot = (c' − c)·RS + tap
      for (int e = lane; e < nch * a.RS * 4; e += 32) {
        const int k = e & 3, slot = e >> 2;
        wf[e] = k < a.K ? __ldg(w + ((size_t)k * a.C + c) * a.RS + slot) : 0.f;
      }
      __syncwarp();
      cl = 0;
    }
    const float4* wc = wt + cl * a.RS;
    const size_t coff = (size_t)c * a.HW;
    for (int r = 0; r < a.R; ++r)
      for (int s = 0; s < a.S; ++s) {
        const float4 wv = wc[r * a.S + s];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int h = hb[v] + r, ww = wb[v] + s;
          float xv = 0.f;
          if (ok[v] && (unsigned)h < (unsigned)a.H && (unsigned)ww < (unsigned)a.W)
            xv = __ldg(xb[v] + coff + h * a.W + ww);
          acc[v][0] = fmaf(xv, wv.x, acc[v][0]);
          acc[v][1] = fmaf(xv, wv.y, acc[v][1]);
          acc[v][2] = fmaf(xv, wv.z, acc[v][2]);
          acc[v][3] = fmaf(xv, wv.w, acc[v][3]);
        }
      }
  }

  __syncthreads();
#pragma unroll
  for (int v = 0; v < 4; ++v)
#pragma unroll
    for (int k = 0; k < 4; ++k) sm.red[warp][k][lane + 32 * v] = acc[v][k];
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int o = threadIdx.x + kThreads * j;  // 512 = 4 channels × 128 pixels
    const int k = o >> 7, px = o & 127, m = m0 + px;
    if (k < a.K && m < a.NPQ) {
      float s = 0.f;
#pragma unroll
      for (int u = 0; u < kWarps; ++u) s += sm.red[u][k][px];
      if (b) s += __ldg(b + k);
      int n, pq;
      a.fPQ.divmod(m, n, pq);
      y[((size_t)n * a.K + k) * a.PQ + pq] = s;
    }
  }
}

// ---- kGeneric backward_data -----------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    thin_dgrad_generic_kernel(const __grid_constant__ ThinArgs a, const float* __restrict__ dy,
                              const float* __restrict__ w, float* __restrict__ dx) {
  constexpr int CB = kGenChannels;
  __shared__ __align__(16) float4 wt[CB * kThinMaxTaps];  // [channel][tap] → K channels
  const int m = blockIdx.x * kThreads + threadIdx.x;
  const bool mvalid = m < a.NHW;
  int n, hw, h, wc;
  a.fHW.divmod(mvalid ? m : 0, n, hw);
  a.fW.divmod(hw, h, wc);
  const int hp = h + a.pad, wp = wc + a.pad;
  const float* dyn = dy + (size_t)n * a.KPQ;

  for (int c0 = blockIdx.y * CB; c0 < a.C; c0 += gridDim.y * CB) {  // block-uniform
    __syncthreads();  // the previous round's reads are done
    float* wf = reinterpret_cast<float*>(wt);
    for (int e = threadIdx.x; e < CB * a.RS * 4; e += kThreads) {  // e = slot·4 + k
      const int k = e & 3, slot = e >> 2;
      int cc, tap;
      a.fRS.divmod(slot, cc, tap);
      wf[e] = (k < a.K && c0 + cc < a.C) ? __ldg(w + ((size_t)k * a.C + c0 + cc) * a.RS + tap)
                                         : 0.f;
    }
    __syncthreads();
    if (!mvalid) continue;
    float acc[CB];
#pragma unroll
    for (int j = 0; j < CB; ++j) acc[j] = 0.f;
    for (int r = 0; r < a.R; ++r) {
      const int ph = hp - r;  // = p·stride when tap r of output row p saw row h
      if (ph < 0) break;      // only decreases with r
      int p, pr;
      a.fStride.divmod(ph, p, pr);
      if (pr != 0 || p >= a.P) continue;
      for (int s = 0; s < a.S; ++s) {
        const int qw = wp - s;
        if (qw < 0) break;
        int q, qr;
        a.fStride.divmod(qw, q, qr);
        if (qr != 0 || q >= a.Q) continue;
        const float* g = dyn + p * a.Q + q;
        float gv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) gv[k] = k < a.K ? __ldg(g + k * a.PQ) : 0.f;
        const float4* wtap = wt + r * a.S + s;
#pragma unroll
        for (int j = 0; j < CB; ++j) {
          const float4 wv = wtap[j * a.RS];
          acc[j] = fmaf(gv[0], wv.x, acc[j]);
          acc[j] = fmaf(gv[1], wv.y, acc[j]);
          acc[j] = fmaf(gv[2], wv.z, acc[j]);
          acc[j] = fmaf(gv[3], wv.w, acc[j]);
        }
      }
    }
    float* out = dx + ((size_t)n * a.C + c0) * a.HW + hw;
#pragma unroll
    for (int j = 0; j < CB; ++j)
      if (c0 + j < a.C) out[(size_t)j * a.HW] = acc[j];
  }
}

// ---- kGeneric backward_params ---------------------------------------------------------------

constexpr int kGenSums = kGenColumns * 4 + 4;  // dw terms of 8 columns × 4 channels, then db

__global__ void __launch_bounds__(kThreads)
    thin_wgrad_generic_kernel(const __grid_constant__ ThinArgs a, const float* __restrict__ x,
                              const float* __restrict__ dy, int per, float* __restrict__ ws,
                              long long ws_stride, bool with_db) {
  constexpr int CC = kGenColumns;
  __shared__ float red[kWarps][kGenSums];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int crs0 = blockIdx.x * CC;
  const bool do_db = with_db && blockIdx.x == 0;
  int roff[CC], rr[CC], ss[CC];  // c·H·W + r·W + s, r, s of column crs0 + j
  unsigned cvalid = 0;
#pragma unroll
  for (int j = 0; j < CC; ++j) {
    const int crs = crs0 + j;
    const bool ok = crs < a.CRS;
    if (ok) cvalid |= 1u << j;
    int c, rs, r, s;
    a.fRS.divmod(ok ? crs : 0, c, rs);
    a.fS.divmod(rs, r, s);
    rr[j] = r;
    ss[j] = s;
    roff[j] = c * a.HW + r * a.W + s;
  }
  float acc[CC][4], dsum[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    dsum[k] = 0.f;
#pragma unroll
    for (int j = 0; j < CC; ++j) acc[j][k] = 0.f;
  }
  const int m0 = blockIdx.y * per, m1 = min(a.NPQ, m0 + per);
  for (int m = m0 + threadIdx.x; m < m1; m += kThreads) {
    int n, pq, p, q;
    a.fPQ.divmod(m, n, pq);
    a.fQ.divmod(pq, p, q);
    const int hb = p * a.stride - a.pad, wb = q * a.stride - a.pad;
    const float* g = dy + (size_t)n * a.KPQ + pq;
    float gv[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) gv[k] = k < a.K ? __ldg(g + k * a.PQ) : 0.f;
    if (do_db) {
#pragma unroll
      for (int k = 0; k < 4; ++k) dsum[k] += gv[k];
    }
    const float* xb = x + (size_t)n * a.CHW;
    const int boff = hb * a.W + wb;  // may be negative; used only when h, w are in range
#pragma unroll
    for (int j = 0; j < CC; ++j) {
      const int h = hb + rr[j], ww = wb + ss[j];
      float xv = 0.f;
      if (((cvalid >> j) & 1u) && (unsigned)h < (unsigned)a.H && (unsigned)ww < (unsigned)a.W)
        xv = __ldg(xb + (roff[j] + boff));  // = c·HW + h·W + w ≥ 0
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[j][k] = fmaf(gv[k], xv, acc[j][k]);
    }
  }
#pragma unroll
  for (int j = 0; j < CC; ++j)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float v = warp_sum(acc[j][k]);
      if (lane == 0) red[warp][j * 4 + k] = v;
    }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float v = warp_sum(dsum[k]);
    if (lane == 0) red[warp][CC * 4 + k] = v;
  }
  __syncthreads();
  const int i = threadIdx.x;
  if (i < kGenSums) {
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < kWarps; ++u) s += red[u][i];
    float* out = ws + blockIdx.y * ws_stride;
    if (i < CC * 4) {
      const int j = i >> 2, k = i & 3;
      if (crs0 + j < a.CRS && k < a.K) out[(size_t)k * a.CRS + crs0 + j] = s;
    } else if (do_db && i - CC * 4 < a.K) {
      out[(size_t)a.K * a.CRS + (i - CC * 4)] = s;
    }
  }
}

// ---- the slices' sum ----------------------------------------------------------------------

// dw[i] += Σ_z ws[z·stride + i] for i < ndw, db[i − ndw] likewise for the next
// ndb; z ascending, in double, rounded once.
__global__ void __launch_bounds__(256)
    thin_reduce_kernel(const float* __restrict__ ws, int splits, long long stride,
                       float* __restrict__ dw, long long ndw, float* __restrict__ db, int ndb) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < ndw + ndb;
       i += (long long)gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int z = 0; z < splits; ++z) s += (double)ws[z * stride + i];
    float* dst = i < ndw ? dw + i : db + (i - ndw);
    *dst = (float)((double)*dst + s);
  }
}

// ---- host side ------------------------------------------------------------------------------

bool fast(ThinPath path) { return path == ThinPath::kFast3x3 || path == ThinPath::kFast5x5; }

int fast_tiles(const Conv2dShape& s, int rows_per_tile) {
  const long long t = (long long)s.N * ((s.H + rows_per_tile - 1) / rows_per_tile) *
                      ((s.W + 31) / 32);
  return int(t);  // ≤ N·H·W < 2^30
}

// How the weight gradient is split: gx blocks per slice, `splits` slices of
// `per` tiles (kFast3x3, kFast5x5) or pixels (kGeneric).
struct WgradPlan {
  long long gx;
  int splits;
  long long per;
  long long stride;  // K·C·R·S + K floats per slice
};

// The fast paths give each channel a warp; with no channel at all (C = 0: db only)
// the generic kernel's one column block does the bias.
ThinPath wgrad_path(const Conv2dShape& s, ThinPath path) {
  return s.C == 0 ? ThinPath::kGeneric : path;
}

WgradPlan wgrad_plan(const Conv2dShape& s, ThinPath path) {
  path = wgrad_path(s, path);
  WgradPlan pl{};
  const long long crs = (long long)s.C * s.R * s.S;
  if (fast(path)) {
    pl.gx = (s.C + kWgradWarps - 1) / kWgradWarps;
    choose_thin_splits(pl.gx, fast_tiles(s, 8), kFastTilesMin, pl.splits, pl.per,
                       thin_fast_wgrad_target(pl.gx, s.R, s.K));
  } else {
    pl.gx = std::max(1ll, (crs + kGenColumns - 1) / kGenColumns);
    choose_thin_splits(pl.gx, (long long)s.N * s.P * s.Q, kGenPixelsMin, pl.splits, pl.per);
  }
  pl.stride = (long long)s.K * crs + s.K;
  return pl;
}

void check_grid(const char* what, long long gx) {
  if (gx < 1 || gx > INT_MAX)
    throw RuntimeError(str("thin conv2d ", what, ": grid of ", gx, " blocks is out of range"));
}

// f(R, KC) with both as std::integral_constant, for a fast path and K in 1..4.
template <class F>
void with_fast(ThinPath path, int K, const char* what, F&& f) {
  const auto with_r = [&](auto r) {
    switch (K) {
      case 1: f(r, std::integral_constant<int, 1>{}); return;
      case 2: f(r, std::integral_constant<int, 2>{}); return;
      case 3: f(r, std::integral_constant<int, 3>{}); return;
      case 4: f(r, std::integral_constant<int, 4>{}); return;
    }
    throw RuntimeError(str("thin conv2d ", what, ": K = ", K, " is not in 1..4"));
  };
  if (path == ThinPath::kFast3x3)
    with_r(std::integral_constant<int, 3>{});
  else
    with_r(std::integral_constant<int, 5>{});
}

}  // namespace

void thin_forward(const Conv2dShape& s, ThinPath path, const float* x, const float* w,
                  const float* b, float* y) {
  const ThinArgs a = make_thin_args(s);
  if (fast(path)) {
    const long long blocks = (long long)s.N * ((s.H + 7) / 8) * ((s.W + 31) / 32);
    check_grid("forward", blocks);
    with_fast(path, s.K, "forward", [&](auto r, auto kc) {
      thin_fwd_fast_kernel<decltype(r)::value, decltype(kc)::value>
          <<<unsigned(blocks), kThreads>>>(a, x, w, b, y);
    });
    HPMC_CUDA_LAUNCH_CHECK("thin conv2d forward (fast)");
    return;
  }
  const long long blocks = ((long long)a.NPQ + 127) / 128;
  check_grid("forward", blocks);
  thin_fwd_generic_kernel<<<unsigned(blocks), kThreads>>>(a, x, w, b, y);
  HPMC_CUDA_LAUNCH_CHECK("thin conv2d forward");
}

void thin_backward_data(const Conv2dShape& s, ThinPath path, const float* dy, const float* w,
                        float* dx) {
  const ThinArgs a = make_thin_args(s);
  if (fast(path)) {
    const int tiles = fast_tiles(s, 4);
    const long long gx = (tiles + kWarps - 1) / kWarps;
    check_grid("backward_data", gx);
    const long long gy = std::min<long long>((s.C + kDgradChannels - 1) / kDgradChannels, 65535);
    with_fast(path, s.K, "backward_data", [&](auto r, auto kc) {
      thin_dgrad_fast_kernel<decltype(r)::value, decltype(kc)::value>
          <<<dim3(unsigned(gx), unsigned(gy)), kThreads>>>(a, dy, w, dx, tiles);
    });
    HPMC_CUDA_LAUNCH_CHECK("thin conv2d backward_data (fast)");
    return;
  }
  const long long gx = ((long long)a.NHW + kThreads - 1) / kThreads;
  check_grid("backward_data", gx);
  const long long gy = std::min<long long>((s.C + kGenChannels - 1) / kGenChannels, 65535);
  thin_dgrad_generic_kernel<<<dim3(unsigned(gx), unsigned(gy)), kThreads>>>(a, dy, w, dx);
  HPMC_CUDA_LAUNCH_CHECK("thin conv2d backward_data");
}

size_t thin_params_workspace(const Conv2dShape& s, ThinPath path) {
  const WgradPlan pl = wgrad_plan(s, path);
  return size_t(pl.splits) * size_t(pl.stride);
}

void thin_backward_params(const Conv2dShape& s, ThinPath path, const float* x, const float* dy,
                          float* dw, float* db, float* ws) {
  path = wgrad_path(s, path);
  const ThinArgs a = make_thin_args(s);
  const WgradPlan pl = wgrad_plan(s, path);
  const bool with_db = db != nullptr;
  if (fast(path)) {
    const int tiles = fast_tiles(s, 8);
    check_grid("backward_params", pl.gx);
    with_fast(path, s.K, "backward_params", [&](auto r, auto kc) {
      thin_wgrad_fast_kernel<decltype(r)::value, decltype(kc)::value>
          <<<dim3(unsigned(pl.gx), unsigned(pl.splits)), kWgradWarps * 32>>>(
              a, x, dy, tiles, int(pl.per), ws, pl.stride, with_db);
    });
    HPMC_CUDA_LAUNCH_CHECK("thin conv2d backward_params (fast)");
  } else {
    check_grid("backward_params", pl.gx);
    thin_wgrad_generic_kernel<<<dim3(unsigned(pl.gx), unsigned(pl.splits)), kThreads>>>(
        a, x, dy, int(pl.per), ws, pl.stride, with_db);
    HPMC_CUDA_LAUNCH_CHECK("thin conv2d backward_params");
  }
  const long long ndw = (long long)s.K * a.CRS;
  const int ndb = with_db ? s.K : 0;
  const long long blocks = std::min<long long>((ndw + ndb + 255) / 256, 4096);
  thin_reduce_kernel<<<unsigned(std::max(1ll, blocks)), 256>>>(ws, pl.splits, pl.stride, dw, ndw,
                                                               db, ndb);
  HPMC_CUDA_LAUNCH_CHECK("thin conv2d backward_params (slice sum)");
}

}  // namespace hpmc::gpu::implicit_detail
