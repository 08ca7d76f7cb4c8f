// implicit_upconv_nhwc_kernels.cuh — the upsample fold (implicit_upconv_kernels.cuh)
// on bf16's channels-last kernel (implicit_nhwc_kernels.cuh): the three passes
// of a fold whose reduction channels come in whole k-tiles of 32 (implicit_plan.h's
// upconv_nhwc), with the operands in NHWC bf16 and the summed filters as bf16
// rows of k. conv2d_implicit_gemm.cu is the only includer.
//
// The GEMMs are the fold's (its notation: x_low [N][C][h][w], y and dy at
// H = 2h, W = 2w, parity p = 2·py + px, tap t = 2a + b):
//   forward         per parity: rows m = (n, i, j), k = t·C + c reads x_low at
//                   (i + a − 1 + py, j + b − 1 + px); B = wb[p][ko][t·C + c]
//   backward_data   rows m = (n, i, j), k = (4p + t)·K + ko reads dy at
//                   (2i + 2 − 2a − py, 2j + 2 − 2b − px); B = wb[c][(4p + t)·K + ko]
//   backward_params per parity: rows ko, columns t·C + c (a block's 128 in one
//                   tap), k = the low-resolution pixels (n, i, j): dy at (2i + py,
//                   2j + px) times x_low at the tap's pixel
// in the same k order as the FP32-stage engine's fold loaders, k ascending
// 16 at a time, from the same bf16 values (the summed filter is rounded to
// float, then to bf16, as the engine rounds it when it reads it): the same
// bits where the slices agree. The epilogues are the engine's (FoldOut,
// FoldActOut, ConvOut; the weight gradient's slices go to
// upconv_wgrad_reduce_kernel's workspace).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/gpu/implicit_nhwc_kernels.cuh"
#include "layers/gpu/implicit_upconv_kernels.cuh"

namespace hpmc::gpu::implicit_detail::nhwc {

// A of the fold's forward (DGRAD false: x_low, cin = C) or backward_data
// (true: dy, cin = K), both NHWC bf16. Thread t copies piece t % 4 of rows
// t/4 + 32i, i < 4 (ALoader's mapping); a k-tile lies inside one tap.
template <bool DGRAD>
struct FoldRowsLoader {
  const UpArgs& a;
  const uint16_t* in;
  int piece, row0, py, px;
  int img0[4];       // the row's image's first pixel, n·hin·win
  int us[4], vs[4];  // the row's low-resolution pixel (i, j)
  unsigned rows_ok = 0;
  int tap = 0, c0 = 0;

  __device__ __forceinline__ int cin() const { return DGRAD ? a.K : a.C; }
  __device__ __forceinline__ int hin() const { return DGRAD ? a.H : a.h; }
  __device__ __forceinline__ int win() const { return DGRAD ? a.W : a.w; }

  __device__ __forceinline__ FoldRowsLoader(const UpArgs& a_, const uint16_t* in_, int parity,
                                            int m0, int tid)
      : a(a_), in(in_), piece(tid % kPieces), row0(tid / kPieces), py(parity >> 1),
        px(parity & 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + row0 + 32 * i;
      const bool ok = m < a.M;
      int img, ij;
      a.fhw.divmod(ok ? m : 0, img, ij);
      a.fw.divmod(ij, us[i], vs[i]);
      img0[i] = img * hin() * win();
      if (ok) rows_ok |= 1u << i;
    }
  }
  __device__ __forceinline__ void start(int kt) {
    const int k0 = kt * kBKN;
    tap = k0 / cin();
    c0 = k0 - tap * cin();
  }
  template <class L = MmaSlots>
  __device__ __forceinline__ void issue(uint4 (*st)[kPieces]) {
    int dy, dx;  // the tap's pixel, from (2i, 2j) (backward_data) or (i, j) (forward)
    if constexpr (DGRAD) {
      const int p = tap >> 2, t = tap & 3;
      dy = 2 - 2 * (t >> 1) - (p >> 1);
      dx = 2 - 2 * (t & 1) - (p & 1);
    } else {
      dy = (tap >> 1) - 1 + py;
      dx = (tap & 1) - 1 + px;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int y = (DGRAD ? 2 * us[i] : us[i]) + dy, x = (DGRAD ? 2 * vs[i] : vs[i]) + dx;
      const bool ok = ((rows_ok >> i) & 1u) && (unsigned)y < (unsigned)hin() &&
                      (unsigned)x < (unsigned)win();
      const uint16_t* src =
          ok ? in + ((long long)(img0[i] + y * win() + x) * cin() + c0 + 8 * piece) : in;
      copy16(reinterpret_cast<float*>(&st[0][0] + L::a(row0 + 32 * i, piece)),
             reinterpret_cast<const float*>(src), ok);
    }
    c0 += kBKN;
    if (c0 == cin()) c0 = 0, ++tap;  // block-uniform: the next tap
  }
};

// The forward's epilogue without split-K (FoldOut, FoldActOut): the tile goes
// through shared memory (the stages, free after the main loop), 64 columns
// at a time, and is stored with the lanes along m. Output pixels of one
// parity lie two floats apart, so tc_store's runs (each lane 4 rows of one
// column) put every store of a warp in a different 32-byte sector; here a
// warp's 32 rows (4 image rows of 8 pixels, say) fall in 8 sectors.
// each(half, put): put(m, column, value) for this thread's values in columns
// 64·half … 64·half + 63 of the tile.
template <bool ACT, class Each>
__device__ __forceinline__ void fold_tile_store(const FoldOutT<ACT>& epi, unsigned char* smem,
                                                int m0, int n0, const Each& each) {
  float* const tile = reinterpret_cast<float*>(smem);
  constexpr int kHalf = kBN / 2, kLd = kBM + 4;
  static_assert(sizeof(float) * kHalf * kLd <= kSmemBytes, "the staged half fits the stages");
  // Rows are stored at m ^ ((column >> 3) & 3): a warp's writes (rows 4g + u,
  // columns 8t + …) then hit 32 banks, and its reads (32 rows of a column) still do.
  const auto swz = [](int col) { return (col >> 3) & 3; };
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    __syncthreads();  // the stages' last reads (or the previous half's) are done
    each(half, [&](int m, int col, float v) {
      col -= half * kHalf;
      tile[col * kLd + (m ^ swz(col))] = v;
    });
    __syncthreads();
    for (int idx = threadIdx.x; idx < kHalf * kBM; idx += kNT) {
      const int nl = idx / kBM, ml = idx - nl * kBM;
      const int m = m0 + ml, n = n0 + half * kHalf + nl;
      if (m >= epi.M || n >= epi.K) continue;
      const float b = epi.bias ? __ldg(epi.bias + n) : 0.f;
      *epi.at(m, n) = epi.value(tile[nl * kLd + (ml ^ swz(nl))], b, n);
    }
  }
}

template <bool ACT>
__device__ __forceinline__ void nhwc_store(const FoldOutT<ACT>& epi,
                                           const float (&acc)[kMI][kNI][4], int m0, int n0) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm0 = (warp % Tc::WGM) * Tc::WM, wn0 = (warp / Tc::WGM) * Tc::WN;
  const int g = lane >> 2, t = lane & 3;
  fold_tile_store(epi, smem_raw, m0, n0, [&](int half, const auto& put) {
    if (wn0 != half * (kBN / 2)) return;  // warp-uniform: this warp's columns are this half
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < kNI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)  // tc_store's row and column of acc[i][j][e]
          put(wm0 + run_pos<2 * kMI>(2 * i + (e >> 1), g),
              wn0 + run_pos<kNI>(j, 2 * t + (e & 1)), acc[i][j][e]);
  });
}

// The same from the wgmma tile (nhwc_wg_store's mapping).
template <bool ACT>
__device__ __forceinline__ void nhwc_wg_store(const FoldOutT<ACT>& epi, const float (&d)[2][64],
                                              int m0, int n0) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  fold_tile_store(epi, wg_smem(), m0, n0, [&](int half, const auto& put) {
#pragma unroll
    for (int jh = 0; jh < 8; ++jh)  // j = 8·half + jh: the half's columns
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = 8 * half + jh;
          put(32 * w + 4 * g + u, 32 * (j >> 2) + 8 * t + 4 * e + (j & 3),
              d[u >> 1][4 * j + 2 * (u & 1) + e]);
        }
  });
}

// Forward (blockIdx.z = parity·splits + slice; Epi FoldOut / FoldActOut with
// one slice, else ConvOut into the parity-major workspace) or backward_data
// (blockIdx.z = the slice; ConvOut on the low-resolution map). Slices of tps
// k-tiles of 32. kSmemBytes of dynamic shared memory.
// WG as conv_nhwc_kernel's.
template <bool DGRAD, class Epi, bool WG = false>
__global__ void __launch_bounds__(kNT, 2)
    upconv_nhwc_kernel(const __grid_constant__ UpArgs a, const uint16_t* __restrict__ in,
                       const uint16_t* __restrict__ wb, int splits, int tps,
                       const __grid_constant__ Epi epi) {
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int kdim = DGRAD ? 16 * a.K : 4 * a.C, ktiles = kdim / kBKN;
  const int parity = DGRAD ? 0 : (int)blockIdx.z / splits;
  const int slice = (int)blockIdx.z - parity * splits;
  const int kt0 = min(slice * tps, ktiles), kt1 = min(kt0 + tps, ktiles);
  FoldRowsLoader<DGRAD> al(a, in, parity, m0, threadIdx.x);
  const int rows = DGRAD ? a.C : a.K;
  BLoader bl(wb + (size_t)parity * rows * kdim, rows, kdim, n0, threadIdx.x);
  if constexpr (WG) {
    float d[2][64];
    nhwc_wg_tile(al, bl, kt0, kt1, d);
    nhwc_wg_store(epi, d, m0, n0);
  } else {
    float acc[kMI][kNI][4];
    nhwc_tile(al, bl, kt0, kt1, acc);
    nhwc_store(epi, acc, m0, n0);
  }
}

// The weight gradient: blockIdx.z = parity·splits + slice, slices of tps
// k-tiles of 32 low-resolution pixels, written whole to out[z][ko][t·C + c]
// (upconv_wgrad_reduce_kernel's workspace). C % 128 == 0, K % 32 == 0.
__global__ void __launch_bounds__(kNT, 2)
    upconv_nhwc_wgrad_kernel(const __grid_constant__ UpArgs a, const uint16_t* __restrict__ xh,
                             const uint16_t* __restrict__ dyh, int splits, int tps,
                             float* __restrict__ out) {
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int parity = (int)blockIdx.z / splits, slice = (int)blockIdx.z - parity * splits;
  const int py = parity >> 1, px = parity & 1;
  const int tap = n0 / a.C, cb = n0 - tap * a.C;
  const int dy = (tap >> 1) - 1 + py, dx = (tap & 1) - 1 + px;
  const int ktiles = (a.M + kBKN - 1) / kBKN;
  const int kt0 = min(slice * tps, ktiles), kt1 = min(kt0 + tps, ktiles);
  const auto rows = [&](int k, int& dp, int& xp) {
    if (k >= a.M) return false;
    int img, ij, i, j;
    a.fhw.divmod(k, img, ij);
    a.fw.divmod(ij, i, j);
    dp = (img * a.H + 2 * i + py) * a.W + 2 * j + px;
    const int y = i + dy, x = j + dx;
    xp = (unsigned)y < (unsigned)a.h && (unsigned)x < (unsigned)a.w ? (img * a.h + y) * a.w + x
                                                                    : -1;
    return true;
  };
  float acc[kMI][kNI][4];
  nhwc_wgrad_tile(rows, xh, dyh, a.K, a.C, m0, cb, kt0, kt1, acc);
  const int cols = 4 * a.C;
  nhwc_wgrad_store(acc, a.K, m0, [&](int ko, int nl, float v0, float v1) {
    float* o = out + ((size_t)blockIdx.z * a.K + ko) * cols + n0 + nl;
    *reinterpret_cast<float2*>(o) = make_float2(v0, v1);
  });
}

// The parities' summed filters (fold_weight_sum) as bf16 rows of k:
//   forward         wb[(p·K + ko)·4C + t·C + c]
//   backward_data   wb[c·16K + (4p + t)·K + ko]
// element e the filter fold_weight_element takes, the layout's fastest index
// on the lanes. An operand of prep_kernel (one launch with the activation's
// conversion).
struct FoldWeightsBf16 {
  const float* w;
  int K, C;
  bool for_dgrad;
  uint16_t* out;
  __host__ __device__ long long count() const { return (long long)K * C; }
  __device__ void operator()(long long e) const {
    fold_weight_element(w, K, C, for_dgrad, e, [&](int ko, int c, int pt, float v) {
      const int p = pt >> 2, t = pt & 3;
      out[for_dgrad ? ((size_t)c * 16 + pt) * K + ko
                    : ((size_t)p * K + ko) * 4 * C + (size_t)t * C + c] = gpu::mma::bf16(v);
    });
  }
};

}  // namespace hpmc::gpu::implicit_detail::nhwc
