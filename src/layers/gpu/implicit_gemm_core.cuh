// implicit_gemm_core.cuh — the tiled, register-blocked, multi-stage FP32 GEMM
// main loop shared by the implicit-GEMM convolutions and the plain GEMM
// (conv2d_implicit_gemm.cu describes the mappings; this file is the engine).
//
// The engine computes, for one block, a BM×BN tile of C[m][n] = Σ_k A(m,k)·B(k,n)
// over a range of BK-wide k-tiles. Where A and B come from is left to two
// "loaders" (template parameters), where C goes to an "epilogue":
//   loader.start(kt)   position at k-tile kt (called once, before any issue);
//   loader.issue(s)    start the asynchronous copies of the current k-tile into
//                      one shared-memory stage s (k-major, s[k][row]), then move
//                      on to the next k-tile. Every element is predicated: an
//                      element outside the matrix is written as 0 and its
//                      address is never read (the copy is given a safe one);
//   epi.kAlongM        whether C is contiguous along m (conv outputs) or n;
//   epi.store_mcol / epi.store_nrow   write 4 consecutive m / n of a column / row.
// issue() is called for consecutive k-tiles in ascending order, so a loader may
// keep running state (the tap-major conv loaders step through taps that way).
//
// Copies: cp.async (sm_80+; 4-byte .ca with a zero-fill source size, or 16-byte
// .cg), which write shared memory without passing through registers; on older
// targets the same helpers load and store synchronously.
//
// Shared memory: a[STAGES][BK][BM+4], b[STAGES][BK][BN+4]. Row stride BM+4 (a
// multiple of 4 floats) keeps every fragment read 16-byte aligned and makes the
// k-fast loader stores (lanes = 8 k × 4 rows) hit 32 distinct banks.
//
// Registers: thread (tm, tn) owns TM×TN accumulators at rows
//   g·4·THR_M + tm·4 + i  (g < TM/4, i < 4)   and columns   h·4·THR_N + tn·4 + j,
// so its A (B) fragment at one k is TM/4 (TN/4) float4 reads from shared memory,
// and a warp's float4 reads are consecutive (conflict-free or broadcast).
// The lanes of a warp run along m (tm = tid mod THR_M) when C is contiguous
// along m, else along n, so that the epilogue's float4 stores are coalesced.
//
// Pipeline (STAGES buffers, one __syncthreads per k-tile; tile i in stage i mod S):
//   prologue: issue tiles 0 … S−2, one commit group each (empty groups past the end)
//   for i:    wait until at most S−2 groups are pending (tile i has landed), barrier;
//             issue tile i+S−1 into stage (i−1) mod S, commit;
//             FFMA on stage i mod S
// The barrier of iteration i makes tile i visible to every thread and follows
// every thread's FFMA on stage (i−1) mod S (iteration i−1), the stage that
// iteration i then overwrites. All branches on i are block-uniform, so every
// thread reaches every barrier.
//
// Each accumulator is the sequence acc = fma(a_k, b_k, acc) over k ascending,
// starting from 0, whatever the tile configuration: the tile shape changes no
// bit of the result (only split-K, which regroups k, and the GEMM_K order of a
// mapping do).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "layers/gpu/cp_async.cuh"

namespace hpmc::gpu::implicit_detail {

constexpr int kBK = 8;   // k-tile depth, the same for every configuration
constexpr int kPad = 4;  // shared-memory row padding, in floats

// A block tile of BM×BN outputs, TM×TN per thread, MINB blocks per SM asked
// of the register allocator (__launch_bounds__), STAGES shared-memory buffers.
template <int BM_, int BN_, int TM_, int TN_, int MINB_, int STAGES_>
struct TileCfg {
  static constexpr bool kWide = false;  // this engine (implicit_gemm_wide.cuh: true)
  static constexpr bool kTc = false;    // implicit_gemm_tc.cuh: true
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, MINB = MINB_, STAGES = STAGES_;
  static constexpr int THR_M = BM / TM, THR_N = BN / TN, NT = THR_M * THR_N;
  static constexpr int GM = TM / 4, GN = TN / 4;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are float4 groups");
  static_assert(BM % TM == 0 && BN % TN == 0, "threads tile the block exactly");
  static_assert(NT % 32 == 0 && NT <= 1024, "whole warps");
  static_assert(STAGES >= 2, "at least double-buffered");
};

template <class Cfg>
struct Smem {
  float a[Cfg::STAGES][kBK][Cfg::BM + kPad];
  float b[Cfg::STAGES][kBK][Cfg::BN + kPad];
};

// ---- how the threads of a block cover one ROWS×BK tile ------------------------
//
// RowFast: consecutive threads take consecutive rows (coalesced when the global
// operand is contiguous along the row index); thread t owns row t mod ROWS and
// the k offsets t/ROWS + e·(NT/ROWS), e < ELEMS. Covered exactly once: t/ROWS
// ranges over [0, NT/ROWS) and ELEMS·NT/ROWS = BK.
template <int ROWS, int NT>
struct RowFast {
  static_assert(NT % ROWS == 0 && (ROWS * kBK) % NT == 0, "RowFast tiling");
  static constexpr int ELEMS = ROWS * kBK / NT;
  static constexpr int KSTEP = NT / ROWS;
  __device__ __forceinline__ static int row(int tid, int = 0) { return tid % ROWS; }
  __device__ __forceinline__ static int kk(int tid, int e) { return tid / ROWS + e * KSTEP; }
};

// KFast: consecutive threads take consecutive k (coalesced when the operand is
// contiguous along k); thread t owns k offset t mod BK and rows
// t/BK + e·(NT/BK), e < ELEMS. Covered exactly once: ELEMS·NT/BK = ROWS.
template <int ROWS, int NT>
struct KFast {
  static_assert(NT % kBK == 0 && (ROWS * kBK) % NT == 0, "KFast tiling");
  static constexpr int ELEMS = ROWS * kBK / NT;
  static constexpr int RSTEP = NT / kBK;
  __device__ __forceinline__ static int kk(int tid, int = 0) { return tid % kBK; }
  __device__ __forceinline__ static int row(int tid, int e) { return tid / kBK + e * RSTEP; }
};

// ---- a strided matrix operand: element (row, k) = p[row·rs + k·ks] ---------------
//
// rows × kdim elements; ROW_FAST picks the thread mapping (true when rs == 1).
// The thread's element e of the tile at k0 lies at base + k0·ks + e·estride:
// base is its first element of the first tile, estride the fixed step between
// its elements (KSTEP·ks along k for RowFast, RSTEP·rs along the rows for
// KFast). An element is copied only when its row is below `rows` (bit e of
// rmask) and its k below kdim (k0 + e·KSTEP < klimit for RowFast, k0 < klimit
// for KFast); any other gets p itself as its (unread) source.
template <int ROWS, int NT, bool ROW_FAST>
struct MatLoader {
  using Map = std::conditional_t<ROW_FAST, RowFast<ROWS, NT>, KFast<ROWS, NT>>;
  static constexpr int ELEMS = Map::ELEMS;
  static_assert(ELEMS <= 32, "row-valid bits fit an unsigned");
  const float* p;
  const float* base;
  long long ks, estride;
  int klimit;  // kdim − (the thread's first k offset): element e valid iff k0 + e·KSTEP < klimit
  int k0 = 0;
  int tid;
  unsigned rmask;  // bit e: element e's row is below `rows`

  __device__ __forceinline__ MatLoader(const float* p_, int rows, int kdim, long long rs,
                                       long long ks_, int row0, int tid_)
      : p(p_), ks(ks_), tid(tid_), rmask(0) {
    const int row = row0 + Map::row(tid, 0);
    const int kfirst = Map::kk(tid, 0);
    if constexpr (ROW_FAST) {
      estride = (long long)Map::KSTEP * ks;
      if (row < rows) rmask = ~0u;
    } else {
      estride = (long long)Map::RSTEP * rs;
#pragma unroll
      for (int e = 0; e < ELEMS; ++e)
        if (row + e * Map::RSTEP < rows) rmask |= 1u << e;
    }
    klimit = kdim - kfirst;
    base = rmask ? p + ((long long)row * rs + (long long)kfirst * ks) : p;
  }

  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
    const float* tile = base + (long long)k0 * ks;  // read only where in range
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
      int k = k0;
      if constexpr (ROW_FAST) k += e * Map::KSTEP;
      const bool ok = ((rmask >> e) & 1u) && k < klimit;
      copy4(&s[Map::kk(tid, e)][Map::row(tid, e)], ok ? tile + e * estride : p, ok);
    }
    k0 += kBK;
  }
};

// ---- a row-major k×N operand read in 16-byte pieces: element (k, n) = p[k·ld + n] ----
//
// ld % 4 == 0, p 16-byte aligned and N % 4 == 0, so each piece of 4 consecutive
// n lies wholly inside or outside the matrix. Piece j of a tile (j < BK·ROWS/4)
// is k offset j / (ROWS/4), columns 4·(j mod ROWS/4) …; thread t takes pieces
// t, t + NT, …; consecutive threads read consecutive 16 bytes.
template <int ROWS, int NT>
struct VecRowLoader {
  static constexpr int PER_K = ROWS / 4;
  static constexpr int PIECES = kBK * PER_K;
  static constexpr int ITERS = (PIECES + NT - 1) / NT;
  static_assert(ROWS % 4 == 0, "whole pieces");
  const float* p;
  int ld, n0, ncols, kdim, tid;
  int k0 = 0;

  __device__ __forceinline__ VecRowLoader(const float* p_, int ld_, int ncols_, int kdim_,
                                          int n0_, int tid_)
      : p(p_), ld(ld_), n0(n0_), ncols(ncols_), kdim(kdim_), tid(tid_) {}

  __device__ __forceinline__ void start(int kt) { k0 = kt * kBK; }
  __device__ __forceinline__ void issue(float (*s)[ROWS + kPad]) {
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int j = tid + it * NT;
      if (PIECES % NT == 0 || j < PIECES) {
        const int kk = j / PER_K, c = (j % PER_K) * 4;
        const int k = k0 + kk, n = n0 + c;
        const bool ok = k < kdim && n < ncols;
        copy16(&s[kk][c], ok ? p + ((long long)k * ld + n) : p, ok);
      }
    }
    k0 += kBK;
  }
};

// ---- the main loop ---------------------------------------------------------------

// Thread coordinates in the THR_M × THR_N grid; lanes run along m or along n.
template <class Cfg, bool LANES_M>
__device__ __forceinline__ void thread_coords(int tid, int& tm, int& tn) {
  if constexpr (LANES_M) {
    tm = tid % Cfg::THR_M;
    tn = tid / Cfg::THR_M;
  } else {
    tn = tid % Cfg::THR_N;
    tm = tid / Cfg::THR_N;
  }
}

// acc += the product of one stage's A and B tiles.
template <class Cfg>
__device__ __forceinline__ void mma_stage(const float (*as)[Cfg::BM + kPad],
                                          const float (*bs)[Cfg::BN + kPad], int tm, int tn,
                                          float (&acc)[Cfg::TM][Cfg::TN]) {
#pragma unroll
  for (int kk = 0; kk < kBK; ++kk) {
    float a[Cfg::TM], b[Cfg::TN];
#pragma unroll
    for (int g = 0; g < Cfg::GM; ++g) {
      const float4 t = *reinterpret_cast<const float4*>(&as[kk][g * 4 * Cfg::THR_M + tm * 4]);
      a[g * 4 + 0] = t.x;
      a[g * 4 + 1] = t.y;
      a[g * 4 + 2] = t.z;
      a[g * 4 + 3] = t.w;
    }
#pragma unroll
    for (int h = 0; h < Cfg::GN; ++h) {
      const float4 t = *reinterpret_cast<const float4*>(&bs[kk][h * 4 * Cfg::THR_N + tn * 4]);
      b[h * 4 + 0] = t.x;
      b[h * 4 + 1] = t.y;
      b[h * 4 + 2] = t.z;
      b[h * 4 + 3] = t.w;
    }
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

// The pipeline over k-tiles [kt0, kt1): compute(stage) once per tile, in
// order, with that tile's A and B in sm.a[stage], sm.b[stage]. Shared by this
// engine (mainloop) and the tensor-core one (implicit_gemm_tc.cuh).
template <class Cfg, class AL, class BL, class Compute>
__device__ __forceinline__ void pipeline(AL& al, BL& bl, Smem<Cfg>& sm, int kt0, int kt1,
                                         Compute&& compute) {
  constexpr int S = Cfg::STAGES;
  const int nt = kt1 - kt0;
  if (nt <= 0) return;  // block-uniform

  al.start(kt0);
  bl.start(kt0);
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    if (st < nt) {
      al.issue(sm.a[st]);
      bl.issue(sm.b[st]);
    }
    copy_commit();
  }
  int rd = 0, wr = S - 1;
  for (int i = 0; i < nt; ++i) {
    copy_wait<S - 2>();
    __syncthreads();
    if (i + S - 1 < nt) {  // block-uniform
      al.issue(sm.a[wr]);
      bl.issue(sm.b[wr]);
    }
    copy_commit();
    compute(rd);
    rd = rd + 1 == S ? 0 : rd + 1;
    wr = wr + 1 == S ? 0 : wr + 1;
  }
}

// acc = Σ over k-tiles [kt0, kt1) of A-tile · B-tile; acc = 0 for an empty range.
template <class Cfg, class AL, class BL>
__device__ __forceinline__ void mainloop(AL& al, BL& bl, Smem<Cfg>& sm, int kt0, int kt1, int tm,
                                         int tn, float (&acc)[Cfg::TM][Cfg::TN]) {
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = 0.f;
  pipeline<Cfg>(al, bl, sm, kt0, kt1,
                [&](int rd) { mma_stage<Cfg>(sm.a[rd], sm.b[rd], tm, tn, acc); });
}

// Hand the accumulators to the epilogue in groups of four consecutive outputs
// along its contiguous axis. m0, n0: the block's first row and column.
template <class Cfg, class Epi>
__device__ __forceinline__ void epilogue(const Epi& epi, const float (&acc)[Cfg::TM][Cfg::TN],
                                         int m0, int n0, int tm, int tn) {
  if constexpr (Epi::kAlongM) {
#pragma unroll
    for (int g = 0; g < Cfg::GM; ++g) {
      const int m = m0 + g * 4 * Cfg::THR_M + tm * 4;
#pragma unroll
      for (int h = 0; h < Cfg::GN; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int n = n0 + h * 4 * Cfg::THR_N + tn * 4 + j;
          const float v[4] = {acc[g * 4 + 0][h * 4 + j], acc[g * 4 + 1][h * 4 + j],
                              acc[g * 4 + 2][h * 4 + j], acc[g * 4 + 3][h * 4 + j]};
          epi.store_mcol(m, n, v);
        }
    }
  } else {
#pragma unroll
    for (int g = 0; g < Cfg::GM; ++g)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = m0 + g * 4 * Cfg::THR_M + tm * 4 + i;
#pragma unroll
        for (int h = 0; h < Cfg::GN; ++h) {
          const int n = n0 + h * 4 * Cfg::THR_N + tn * 4;
          const float v[4] = {acc[g * 4 + i][h * 4 + 0], acc[g * 4 + i][h * 4 + 1],
                              acc[g * 4 + i][h * 4 + 2], acc[g * 4 + i][h * 4 + 3]};
          epi.store_nrow(m, n, v);
        }
      }
  }
}

// The block's GEMM tile, start to end: thread coordinates, main loop, epilogue.
template <class Cfg, class AL, class BL, class Epi>
__device__ __forceinline__ void classic_tile(AL& al, BL& bl, int kt0, int kt1, const Epi& epi,
                                             int m0, int n0) {
  __shared__ __align__(16) Smem<Cfg> sm;
  int tm, tn;
  thread_coords<Cfg, Epi::kAlongM>(threadIdx.x, tm, tn);
  float acc[Cfg::TM][Cfg::TN];
  mainloop<Cfg>(al, bl, sm, kt0, kt1, tm, tn, acc);
  epilogue<Cfg>(epi, acc, m0, n0, tm, tn);
}

// ---- epilogues -------------------------------------------------------------------

// C row-major: out[m·ld + n] (= or +=). In a split-K launch each blockIdx.z
// writes its own slice, out + z·split_stride.
struct MatOut {
  static constexpr bool kAlongM = false;
  float* out;
  long long ld, split_stride;
  int M, N;
  bool accumulate;
  bool vec;  // ld % 4 == 0, out 16-byte aligned and split_stride % 4 == 0

  // Four consecutive columns n..n+3 of row m (n is a multiple of 4 relative to
  // the aligned block origin, so with vec the float4 is aligned).
  __device__ __forceinline__ void store_nrow(int m, int n, const float (&v)[4]) const {
    if (m >= M || n >= N) return;
    float* row = out + (long long)blockIdx.z * split_stride + (long long)m * ld;
    if (vec && n + 3 < N) {
      float4 o = make_float4(v[0], v[1], v[2], v[3]);
      if (accumulate) {
        const float4 old = *reinterpret_cast<const float4*>(row + n);
        o.x = old.x + o.x;
        o.y = old.y + o.y;
        o.z = old.z + o.z;
        o.w = old.w + o.w;
      }
      *reinterpret_cast<float4*>(row + n) = o;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (n + j < N) row[n + j] = accumulate ? row[n + j] + v[j] : v[j];
    }
  }
};

}  // namespace hpmc::gpu::implicit_detail
