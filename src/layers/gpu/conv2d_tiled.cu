// conv2d_tiled.cu — the `tiled` kernel family: shared-memory tiles of the
// input and the weights, and weight gradients reduced per block into a
// workspace (no atomics), so results are bit-identical run to run.
//
// Mapping:
//   forward          A block of 16×16 threads owns a 16×16 tile of output pixels (p, q) of
//                    one image and kKT = 8 consecutive output channels; thread (ty, tx)
//                    keeps the 8 sums of pixel (p0+ty, q0+tx) in registers. Looping over the
//                    input channels `ct` at a time, the block stages in shared memory the
//                    input halo tile those pixels read ((15·stride + R) × (15·stride + S)
//                    per channel, zero where it falls in the padding or off the image) and
//                    the weight slice w[k0..k0+8, c, :, :] (zero past K), synchronizes,
//                    accumulates, synchronizes again before the next load.
//   backward_data    The same shape turned around: a block owns a 16×16 tile of input
//                    pixels (h, w) of one image and kCG = 8 input channels, and loops over
//                    the output channels `kc` at a time, staging the dy window the tile's
//                    pixels can receive from (rows p with p·stride − pad + r = h for some
//                    tap r: at most (14 + R)/stride + 1 of them, likewise for the columns;
//                    zero outside 0..P−1 / 0..Q−1) and the weights w[k, c0..c0+8, :, :].
//                    Each thread gathers over (k, r, s) with the exact inverse mapping of
//                    the naive kernel.
//   backward_params  dW [K, C·R·S] = Σ over N·P·Q of dy[k, pos]·col[crs, pos] (col = the
//                    im2col matrix, computed on the fly). N·P·Q is cut into slices (~1024
//                    positions); block (crs tile, k tile, slice) stages 16 k × 16 positions
//                    of dy and 16 crs × 16 positions of col in shared memory, each thread
//                    sums one (k, crs) over the slice, and writes its partial sum to the
//                    workspace [slice][K·C·R·S]. db partials: one 256-thread block per
//                    (k, slice), a shared-memory tree reduction. A second kernel then adds,
//                    per element, the partials in slice order 0, 1, 2, ... to dw / db.
//   gemm             The classic 16×16 shared-memory tiled GEMM: block (tile of C) walks
//                    the inner dimension 16 at a time, staging op(A) and op(B) tiles (loaded
//                    coalesced whichever the transposes; zero past m, n, k); the grid walks
//                    the row tiles in a grid-stride loop so any m fits.
// Where the forward halo tile (or a backward_data window) of even one channel
// would not fit in 48 KiB of shared memory — strides of 7 and more, or kernels
// wider than about 60 — or a grid dimension would overflow, the call runs the
// naive kernel instead (correct for any size, just slower).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>

#include "core/cuda_check.h"
#include "layers/gpu/conv2d_kernels.h"
#include "layers/gpu/scratch.h"

namespace hpmc::gpu::tiled {

namespace {

constexpr int kTile = 16;                  // output (forward) / input (backward) tile edge
constexpr int kThreads = kTile * kTile;    // threads per block of the conv kernels
constexpr int kKT = 8;                     // output channels per forward block
constexpr int kCG = 8;                     // input channels per backward_data block
constexpr size_t kMaxSmem = 48 * 1024;     // dynamic shared memory without opting in
constexpr int kMaxGridYZ = 65535;

// floor(a / b) and ceil(a / b) for b > 0 and any sign of a (C++ division
// truncates toward zero).
__host__ __device__ inline int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
__host__ __device__ inline int ceil_div(int a, int b) { return -floor_div(-a, b); }

// ---- forward ------------------------------------------------------------------------

// Launch: grid (N·tiles_p·tiles_q, ceil(K / kKT)), block (kTile, kTile),
// dynamic shared memory ct·(ih_t·iw_t + kKT·R·S) floats.
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Conv2dShape s, const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ b, float* __restrict__ y, int tiles_p, int tiles_q,
                   int ct) {
  extern __shared__ float smem[];
  const int ih_t = (kTile - 1) * s.stride + s.R;  // input rows the tile's outputs read
  const int iw_t = (kTile - 1) * s.stride + s.S;
  const int tile_in = ih_t * iw_t;
  const int rs = s.R * s.S;
  float* s_in = smem;                 // [ct][ih_t][iw_t]
  float* s_w = smem + ct * tile_in;   // [ct][kKT][R][S]

  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  int bid = blockIdx.x;
  const int tq = bid % tiles_q;
  bid /= tiles_q;
  const int tp = bid % tiles_p;
  const int n = bid / tiles_p;
  const int k0 = blockIdx.y * kKT;
  const int p = tp * kTile + ty, q = tq * kTile + tx;
  const bool active = p < s.P && q < s.Q;
  // Input row/column of tap 0 of the tile's first output row/column.
  const int h_base = tp * kTile * s.stride - s.pad;
  const int w_base = tq * kTile * s.stride - s.pad;

  float acc[kKT];
#pragma unroll
  for (int kk = 0; kk < kKT; ++kk) acc[kk] = 0.f;

  for (int c0 = 0; c0 < s.C; c0 += ct) {
    const int nc = min(ct, s.C - c0);
    // Stage the halo tiles of channels c0..c0+nc (zeros outside the image).
    for (int i = tid; i < nc * tile_in; i += kThreads) {
      const int cc = i / tile_in, rem = i - cc * tile_in;
      const int th = rem / iw_t, tw = rem - th * iw_t;
      const int ih = h_base + th, iw = w_base + tw;
      float v = 0.f;
      if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
        v = x[((size_t(n) * s.C + (c0 + cc)) * s.H + ih) * s.W + iw];
      s_in[i] = v;
    }
    // Stage w[k0..k0+kKT, c0..c0+nc, :, :] as [cc][kk][r][s] (zeros past K).
    for (int i = tid; i < nc * kKT * rs; i += kThreads) {
      const int cc = i / (kKT * rs), rem = i - cc * (kKT * rs);
      const int kk = rem / rs, j = rem - kk * rs;
      const int k = k0 + kk;
      s_w[i] = k < s.K ? w[(size_t(k) * s.C + (c0 + cc)) * rs + j] : 0.f;
    }
    __syncthreads();
    if (active) {
      for (int cc = 0; cc < nc; ++cc) {
        // Output (p, q) reads tile row ty·stride + r, column tx·stride + s.
        const float* in_c = s_in + cc * tile_in + (ty * s.stride) * iw_t + tx * s.stride;
        const float* w_c = s_w + cc * (kKT * rs);
        for (int r = 0; r < s.R; ++r)
          for (int t = 0; t < s.S; ++t) {
            const float v = in_c[r * iw_t + t];
            const int j = r * s.S + t;
#pragma unroll
            for (int kk = 0; kk < kKT; ++kk) acc[kk] += v * w_c[kk * rs + j];
          }
      }
    }
    __syncthreads();  // the next chunk overwrites s_in / s_w
  }

  if (active) {
#pragma unroll
    for (int kk = 0; kk < kKT; ++kk) {
      const int k = k0 + kk;
      if (k < s.K) y[((size_t(n) * s.K + k) * s.P + p) * s.Q + q] = b ? acc[kk] + b[k] : acc[kk];
    }
  }
}

// ---- backward_data ------------------------------------------------------------------

// Launch: grid (N·tiles_h·tiles_w, ceil(C / kCG)), block (kTile, kTile),
// dynamic shared memory kc·(pt·qt + kCG·R·S) floats.
__global__ void __launch_bounds__(kThreads)
    backward_data_kernel(Conv2dShape s, const float* __restrict__ dy,
                         const float* __restrict__ w, float* __restrict__ dx, int tiles_h,
                         int tiles_w, int pt, int qt, int kc) {
  extern __shared__ float smem[];
  const int rs = s.R * s.S;
  const int tile_dy = pt * qt;
  float* s_dy = smem;                 // [kc][pt][qt]
  float* s_w = smem + kc * tile_dy;   // [kc][kCG][R][S]

  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  int bid = blockIdx.x;
  const int tw_i = bid % tiles_w;
  bid /= tiles_w;
  const int th_i = bid % tiles_h;
  const int n = bid / tiles_h;
  const int c0 = blockIdx.y * kCG;
  const int h0 = th_i * kTile, w0 = tw_i * kTile;
  const int h = h0 + ty, wx = w0 + tx;
  const bool active = h < s.H && wx < s.W;
  // The first output row any pixel of the tile receives from: the smallest
  // p with p·stride ≥ h0 + pad − (R − 1). Rows p_lo .. p_lo + pt − 1 cover
  // every p ≤ (h0 + 15 + pad)/stride (see the host code for pt).
  const int p_lo = ceil_div(h0 + s.pad - (s.R - 1), s.stride);
  const int q_lo = ceil_div(w0 + s.pad - (s.S - 1), s.stride);

  float acc[kCG];
#pragma unroll
  for (int cc = 0; cc < kCG; ++cc) acc[cc] = 0.f;

  for (int k0 = 0; k0 < s.K; k0 += kc) {
    const int nk = min(kc, s.K - k0);
    // Stage dy[n, k0..k0+nk, p_lo.., q_lo..] (zeros outside the output plane).
    for (int i = tid; i < nk * tile_dy; i += kThreads) {
      const int kk = i / tile_dy, rem = i - kk * tile_dy;
      const int a = rem / qt, bq = rem - a * qt;
      const int p = p_lo + a, q = q_lo + bq;
      float v = 0.f;
      if (p >= 0 && p < s.P && q >= 0 && q < s.Q)
        v = dy[((size_t(n) * s.K + (k0 + kk)) * s.P + p) * s.Q + q];
      s_dy[i] = v;
    }
    // Stage w[k0..k0+nk, c0..c0+kCG, :, :] as [kk][cc][r][s] (zeros past C).
    for (int i = tid; i < nk * kCG * rs; i += kThreads) {
      const int kk = i / (kCG * rs), rem = i - kk * (kCG * rs);
      const int cc = rem / rs, j = rem - cc * rs;
      const int c = c0 + cc;
      s_w[i] = c < s.C ? w[(size_t(k0 + kk) * s.C + c) * rs + j] : 0.f;
    }
    __syncthreads();
    if (active) {
      for (int kk = 0; kk < nk; ++kk)
        for (int r = 0; r < s.R; ++r) {
          // Output row p saw input row h through tap r iff p·stride − pad + r == h.
          const int ph = h + s.pad - r;
          if (ph < 0 || ph % s.stride != 0) continue;
          const int p = ph / s.stride;
          if (p >= s.P) continue;
          const int a = p - p_lo;  // in [0, pt): p_lo ≤ p ≤ p_lo + pt − 1
          for (int t = 0; t < s.S; ++t) {
            const int qw = wx + s.pad - t;
            if (qw < 0 || qw % s.stride != 0) continue;
            const int q = qw / s.stride;
            if (q >= s.Q) continue;
            const int bq = q - q_lo;  // in [0, qt)
            const float v = s_dy[(kk * pt + a) * qt + bq];
            const float* wp = s_w + kk * (kCG * rs) + r * s.S + t;
#pragma unroll
            for (int cc = 0; cc < kCG; ++cc) acc[cc] += v * wp[cc * rs];
          }
        }
    }
    __syncthreads();  // the next chunk overwrites s_dy / s_w
  }

  if (active) {
#pragma unroll
    for (int cc = 0; cc < kCG; ++cc) {
      const int c = c0 + cc;
      if (c < s.C) dx[((size_t(n) * s.C + c) * s.H + h) * s.W + wx] = acc[cc];
    }
  }
}

// ---- backward_params --------------------------------------------------------------

constexpr int kBT = 16;               // dW tile: 16 k × 16 crs, inner steps of 16 positions
constexpr long long kSliceTarget = 1024;       // positions of N·P·Q per block
constexpr size_t kMaxPartialFloats = size_t(1) << 24;  // 64 MiB of partial sums at most
constexpr int kReduceThreads = 256;  // db partial blocks (a power of two)

// Launch: grid (ceil(CRS / kBT), ceil(K / kBT), nslices), block (kBT, kBT).
// Writes part[slice][k][crs] = Σ_{pos in slice} dy[k, pos]·col[crs, pos] for
// every k < K, crs < CRS.
__global__ void __launch_bounds__(kBT * kBT)
    weight_partial_kernel(Conv2dShape s, const float* __restrict__ x,
                          const float* __restrict__ dy, float* __restrict__ part,
                          long long slice_len) {
  __shared__ float s_dy[kBT][kBT + 1];   // [k - k0][pos - pos0]
  __shared__ float s_col[kBT][kBT + 1];  // [crs - crs0][pos - pos0]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int crs_count = s.C * s.R * s.S;
  const int rs = s.R * s.S;
  const long long pq = (long long)s.P * s.Q;
  const long long npq = (long long)s.N * pq;
  const int crs0 = blockIdx.x * kBT, k0 = blockIdx.y * kBT;
  const long long beg = (long long)blockIdx.z * slice_len;
  const long long end = min(beg + slice_len, npq);

  // This thread's loads: row ty of both tiles. Its sum: (k0 + ty, crs0 + tx).
  const int k_ld = k0 + ty, crs_ld = crs0 + ty;
  int c_ld = 0, r_ld = 0, t_ld = 0;
  if (crs_ld < crs_count) {
    c_ld = crs_ld / rs;
    const int j = crs_ld - c_ld * rs;
    r_ld = j / s.S;
    t_ld = j - r_ld * s.S;
  }

  float acc = 0.f;
  for (long long pos0 = beg; pos0 < end; pos0 += kBT) {
    const long long pos = pos0 + tx;
    float vdy = 0.f, vcol = 0.f;
    if (pos < end) {
      const int n = int(pos / pq);
      const int pqi = int(pos - n * pq);
      const int p = pqi / s.Q, q = pqi - p * s.Q;
      if (k_ld < s.K) vdy = dy[(size_t(n) * s.K + k_ld) * size_t(pq) + pqi];
      if (crs_ld < crs_count) {
        const int ih = p * s.stride - s.pad + r_ld, iw = q * s.stride - s.pad + t_ld;
        if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W)
          vcol = x[((size_t(n) * s.C + c_ld) * s.H + ih) * s.W + iw];
      }
    }
    s_dy[ty][tx] = vdy;
    s_col[ty][tx] = vcol;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kBT; ++j) acc += s_dy[ty][j] * s_col[tx][j];
    __syncthreads();  // the next step overwrites the tiles
  }

  const int k = k0 + ty, crs = crs0 + tx;
  if (k < s.K && crs < crs_count)
    part[size_t(blockIdx.z) * (size_t(s.K) * crs_count) + size_t(k) * crs_count + crs] = acc;
}

// Launch: grid (K·nslices), block kReduceThreads. Writes part[slice][k] =
// Σ_{pos in slice} dy[k, pos] for every k < K, slice < nslices.
__global__ void __launch_bounds__(kReduceThreads)
    bias_partial_kernel(Conv2dShape s, const float* __restrict__ dy, float* __restrict__ part,
                        long long slice_len, int nslices) {
  __shared__ float red[kReduceThreads];
  const int tid = threadIdx.x;
  const int slice = int(blockIdx.x % unsigned(nslices));
  const int k = int(blockIdx.x / unsigned(nslices));
  const long long pq = (long long)s.P * s.Q;
  const long long npq = (long long)s.N * pq;
  const long long beg = (long long)slice * slice_len;
  const long long end = min(beg + slice_len, npq);

  float acc = 0.f;
  for (long long pos = beg + tid; pos < end; pos += kReduceThreads) {
    const long long n = pos / pq;
    acc += dy[(size_t(n) * s.K + k) * size_t(pq) + size_t(pos - n * pq)];
  }
  red[tid] = acc;
  __syncthreads();
  // Fixed-shape tree: the same additions in the same order every run.
  for (int half = kReduceThreads / 2; half > 0; half >>= 1) {
    if (tid < half) red[tid] += red[tid + half];
    __syncthreads();
  }
  if (tid == 0) part[size_t(slice) * s.K + k] = red[0];
}

// out[i] += Σ_{sl = 0, 1, ...} part[sl·count + i], in slice order.
__global__ void add_partials_kernel(const float* __restrict__ part, int nparts, size_t count,
                                    float* __restrict__ out) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int sl = 0; sl < nparts; ++sl) acc += part[size_t(sl) * count + i];
    out[i] += acc;
  }
}

DeviceScratch& workspace() {
  static DeviceScratch ws;
  return ws;
}

// ---- gemm -------------------------------------------------------------------------------

constexpr int kGT = 16;

// Launch: grid (ceil(n / kGT), min(ceil(m / kGT), 65535)), block (kGT, kGT).
__global__ void __launch_bounds__(kGT * kGT)
    gemm_kernel(bool trans_a, bool trans_b, int m, int n, int k, const float* __restrict__ a,
                int lda, const float* __restrict__ b, int ldb, float* __restrict__ c, int ldc,
                bool accumulate, int tiles_m) {
  __shared__ float sa[kGT][kGT + 1];  // sa[i][l] = op(A)[i0 + i, l0 + l]
  __shared__ float sb[kGT][kGT + 1];  // sb[l][j] = op(B)[l0 + l, j0 + j]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int j0 = blockIdx.x * kGT;
  for (int tile_i = blockIdx.y; tile_i < tiles_m; tile_i += gridDim.y) {  // uniform per block
    const int i0 = tile_i * kGT;
    float acc = 0.f;
    for (int l0 = 0; l0 < k; l0 += kGT) {
      // Each thread stores one element of each tile; the thread → element
      // map is chosen so that consecutive tx read consecutive addresses.
      if (!trans_a) {  // A is m×k: element (i0+ty, l0+tx) at a[i·lda + l]
        const int i = i0 + ty, l = l0 + tx;
        sa[ty][tx] = (i < m && l < k) ? a[size_t(i) * lda + l] : 0.f;
      } else {  // A is stored k×m: element (i0+tx, l0+ty) at a[l·lda + i]
        const int i = i0 + tx, l = l0 + ty;
        sa[tx][ty] = (i < m && l < k) ? a[size_t(l) * lda + i] : 0.f;
      }
      if (!trans_b) {  // B is k×n: element (l0+ty, j0+tx) at b[l·ldb + j]
        const int l = l0 + ty, j = j0 + tx;
        sb[ty][tx] = (l < k && j < n) ? b[size_t(l) * ldb + j] : 0.f;
      } else {  // B is stored n×k: element (l0+tx, j0+ty) at b[j·ldb + l]
        const int l = l0 + tx, j = j0 + ty;
        sb[tx][ty] = (l < k && j < n) ? b[size_t(j) * ldb + l] : 0.f;
      }
      __syncthreads();
#pragma unroll
      for (int l = 0; l < kGT; ++l) acc += sa[ty][l] * sb[l][tx];
      __syncthreads();  // the next step (or row tile) overwrites sa / sb
    }
    const int i = i0 + ty, j = j0 + tx;
    if (i < m && j < n) {
      float* out = c + size_t(i) * ldc + j;
      *out = accumulate ? *out + acc : acc;
    }
  }
}

}  // namespace

// ---- host entry points ------------------------------------------------------------

void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                    float* y) {
  if (size_t(s.N) * s.K * s.P * s.Q == 0) return;
  const size_t ih_t = size_t(kTile - 1) * s.stride + s.R;
  const size_t iw_t = size_t(kTile - 1) * s.stride + s.S;
  const size_t per_channel = (ih_t * iw_t + size_t(kKT) * s.R * s.S) * sizeof(float);
  int ct = 8;  // input channels staged per step: as many as fit, at most C
  while (ct > 1 && (ct > s.C || ct * per_channel > kMaxSmem)) ct /= 2;
  const size_t tiles_p = (size_t(s.P) + kTile - 1) / kTile;
  const size_t tiles_q = (size_t(s.Q) + kTile - 1) / kTile;
  const size_t blocks_x = size_t(s.N) * tiles_p * tiles_q;
  const size_t blocks_y = (size_t(s.K) + kKT - 1) / kKT;
  if (ct * per_channel > kMaxSmem || blocks_x > size_t(INT_MAX) || blocks_y > size_t(kMaxGridYZ)) {
    naive::conv2d_forward(s, x, w, b, y);
    return;
  }
  forward_kernel<<<dim3(unsigned(blocks_x), unsigned(blocks_y)), dim3(kTile, kTile),
                   ct * per_channel>>>(s, x, w, b, y, int(tiles_p), int(tiles_q), ct);
  HPMC_CUDA_LAUNCH_CHECK("tiled conv2d forward");
}

void conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  if (size_t(s.N) * s.C * s.H * s.W == 0) return;
  // The dy rows a 16-row tile of dx can receive from: p with
  // ceil((h0 + pad − R + 1)/stride) ≤ p ≤ floor((h0 + 15 + pad)/stride), an
  // interval of length 15 + R − 1 holds at most floor((14 + R)/stride) + 1
  // multiples of stride.
  const int pt = (kTile + s.R - 2) / s.stride + 1;
  const int qt = (kTile + s.S - 2) / s.stride + 1;
  const size_t per_k = (size_t(pt) * qt + size_t(kCG) * s.R * s.S) * sizeof(float);
  int kc = 8;  // output channels staged per step: as many as fit, at most K
  while (kc > 1 && (kc > s.K || kc * per_k > kMaxSmem)) kc /= 2;
  const size_t tiles_h = (size_t(s.H) + kTile - 1) / kTile;
  const size_t tiles_w = (size_t(s.W) + kTile - 1) / kTile;
  const size_t blocks_x = size_t(s.N) * tiles_h * tiles_w;
  const size_t blocks_y = (size_t(s.C) + kCG - 1) / kCG;
  if (kc * per_k > kMaxSmem || blocks_x > size_t(INT_MAX) || blocks_y > size_t(kMaxGridYZ)) {
    naive::conv2d_backward_data(s, dy, w, dx);
    return;
  }
  backward_data_kernel<<<dim3(unsigned(blocks_x), unsigned(blocks_y)), dim3(kTile, kTile),
                         kc * per_k>>>(s, dy, w, dx, int(tiles_h), int(tiles_w), pt, qt, kc);
  HPMC_CUDA_LAUNCH_CHECK("tiled conv2d backward_data");
}

void conv2d_backward_params(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                            float* db) {
  const long long npq = (long long)s.N * s.P * s.Q;
  const size_t crs = size_t(s.C) * s.R * s.S;
  const size_t wcount = size_t(s.K) * crs;
  if (npq == 0 || wcount == 0) return;  // nothing to add
  // Slices of ~kSliceTarget positions, fewer (longer) ones if the partial
  // sums would not fit in kMaxPartialFloats; every slice is non-empty.
  long long nslices = (npq + kSliceTarget - 1) / kSliceTarget;
  const long long cap = std::max<long long>(1, (long long)(kMaxPartialFloats / (wcount + s.K)));
  nslices = std::min({nslices, cap, (long long)kMaxGridYZ});
  long long slice_len = (npq + nslices - 1) / nslices;
  slice_len = (slice_len + kBT - 1) / kBT * kBT;
  nslices = (npq + slice_len - 1) / slice_len;

  const size_t crs_tiles = (crs + kBT - 1) / kBT;
  const size_t k_tiles = (size_t(s.K) + kBT - 1) / kBT;
  const size_t bias_blocks = size_t(s.K) * size_t(nslices);
  if (crs > size_t(INT_MAX) || crs_tiles > size_t(INT_MAX) || k_tiles > size_t(kMaxGridYZ) ||
      bias_blocks > size_t(INT_MAX)) {
    naive::conv2d_backward_params(s, x, dy, dw, db);
    return;
  }

  const size_t wparts = size_t(nslices) * wcount;
  const size_t bparts = db ? size_t(nslices) * s.K : 0;
  float* part_w = workspace().floats(wparts + bparts);
  float* part_b = part_w + wparts;

  weight_partial_kernel<<<dim3(unsigned(crs_tiles), unsigned(k_tiles), unsigned(nslices)),
                          dim3(kBT, kBT)>>>(s, x, dy, part_w, slice_len);
  HPMC_CUDA_LAUNCH_CHECK("tiled conv2d weight partial sums");
  add_partials_kernel<<<grid_for(wcount), kBlock>>>(part_w, int(nslices), wcount, dw);
  HPMC_CUDA_LAUNCH_CHECK("tiled conv2d weight reduction");
  if (db) {
    bias_partial_kernel<<<unsigned(bias_blocks), kReduceThreads>>>(s, dy, part_b, slice_len,
                                                                     int(nslices));
    HPMC_CUDA_LAUNCH_CHECK("tiled conv2d bias partial sums");
    add_partials_kernel<<<grid_for(size_t(s.K)), kBlock>>>(part_b, int(nslices), size_t(s.K), db);
    HPMC_CUDA_LAUNCH_CHECK("tiled conv2d bias reduction");
  }
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  const int tiles_m = (m + kGT - 1) / kGT;
  const int tiles_n = (n + kGT - 1) / kGT;
  const int grid_y = std::min(tiles_m, kMaxGridYZ);
  gemm_kernel<<<dim3(unsigned(tiles_n), unsigned(grid_y)), dim3(kGT, kGT)>>>(
      trans_a, trans_b, m, n, std::max(k, 0), a, lda, b, ldb, c, ldc, accumulate, tiles_m);
  HPMC_CUDA_LAUNCH_CHECK("tiled gemm");
}

}  // namespace hpmc::gpu::tiled
