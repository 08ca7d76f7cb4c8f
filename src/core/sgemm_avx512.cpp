// sgemm_avx512.cpp — hpmc's own SGEMM for CPUs with AVX-512 (see sgemm.h).
//
// C[M×N] = alpha · op(A)[M×K] · op(B)[K×N] + beta · C, all row-major, in the
// BLIS arrangement of loops around a register-blocked micro-kernel:
//
//   for jc in N by NC:
//     for pc in K by kc (K cut into near-equal blocks of at most kKC):
//       pack op(B)[pc.., jc..] → Bp: NR-wide micro-panels, k-major   (L2)
//       for ic in M by kMC:
//         pack op(A)[ic.., pc..] → Ap: kMR-tall micro-panels, k-major
//         for ir in MC by kMR:          an A micro-panel (kMR × kc) stays in L1
//           for jr in NC by NR:         B micro-panels stream from L2
//             micro-kernel: C[ir.., jr..] (kMR × NR) = Ap · Bp over kc
//
// Packing takes care of the transposes, the leading dimensions and the edges:
// a micro-panel past the end of A or B is padded with zeros, so the kernel
// always runs full tiles and only its store is masked. A transposed operand
// (K contiguous in memory) is packed through 8×16 register transposes. Where
// packing would not pay (choose_direct), whole panels of A, and of B when M
// is short, are read in place and only a ragged last panel is packed. When B
// is transposed and larger than A, the product is run as C^T = B·op(A)^T
// with a transposing store, so that the smaller operand is the one
// transposed (sgemm_avx512).
//
// The micro-kernel keeps a kMR × NR tile of C in kMR·NV zmm registers
// (NR = 16·NV; NV = 3 gives 24 accumulators): per k it loads NV vectors of
// Bp, broadcasts kMR values of Ap and issues kMR·NV FMAs. NV is chosen per
// call from N (1, 2 or 3) to waste the least padding; the tile shape does not
// change any element's rounding.
//
// The first K block stores alpha·acc + beta·C (beta == 0: alpha·acc, C not
// read); later blocks add alpha·acc onto C. So each element's sum order is
// fixed by K alone (sgemm.h, determinism).
//
// The tile store, the register transposes, the K cut and the pack buffers
// are shared with the bf16 GEMM (gemm_avx512_common.h). Every function here
// carries a target attribute instead of relying on the build's -march:
// sgemm.cpp calls in only when the CPU has AVX-512.
#include "core/error.h"
#include "core/sgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsics (unpack, extract) start from
// _mm512_undefined_ps(), which -Wmaybe-uninitialized reports once inlined
// (GCC bug 105593, fixed in GCC 13). Quieted for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "core/gemm_avx512_common.h"

namespace hpmc {

namespace {

using gemm_avx512::choose_nv;
using gemm_avx512::kblocks_for;
using gemm_avx512::kMR;
using gemm_avx512::scale_c;
using gemm_avx512::store_tile;
using gemm_avx512::store_transposed;
using gemm_avx512::transpose8x16;
using gemm_avx512::transpose_rows8;

constexpr int kKC = 512;  // deepest K block: an A micro-panel is kMR·kKC·4 = 16 KiB
constexpr int kMC = 192;  // rows of a packed A block
constexpr int kNC = 384;  // columns of a packed B block: kKC·kNC·4 = 768 KiB, in L2

thread_local gemm_avx512::PackBuffer<float> a_pack, b_pack;

// Ap ← op(A)[i0 : i0+mc, p0 : p0+kc] as kMR-row micro-panels: element (i, p)
// of panel q lands at Ap[q·kMR·kc + p·kMR + i], rows past mc are zeros.
HPMC_AVX512 void pack_a(bool trans, const float* a, ptrdiff_t lda, int i0, int mc, int p0, int kc,
                        float* ap) {
  for (int ir = 0; ir < mc; ir += kMR) {
    const int mr = std::min(kMR, mc - ir);
    float* dst = ap + ptrdiff_t(ir) * kc;
    if (trans) {  // op(A)(i, p) = a[p·lda + i]: kMR neighbours per p
      const float* src = a + p0 * lda + i0 + ir;
      const __mmask8 mask = __mmask8((1u << mr) - 1);
      for (int p = 0; p < kc; ++p)
        _mm256_store_ps(dst + p * kMR, _mm256_maskz_loadu_ps(mask, src + p * lda));
    } else {  // op(A)(i, p) = a[i·lda + p]: K runs along memory, transpose
      transpose_rows8(a + (i0 + ir) * lda + p0, lda, mr, kc, dst, kMR);
    }
  }
}

// Bp ← op(B)[p0 : p0+kc, j0 : j0+nc] as NR-column micro-panels: element
// (p, j) of panel q lands at Bp[q·NR·kc + p·NR + j], columns past nc are zeros.
template <int NV>
HPMC_AVX512 void pack_b(bool trans, const float* b, ptrdiff_t ldb, int p0, int kc, int j0, int nc,
                        float* bp) {
  constexpr int NR = 16 * NV;
  for (int jr = 0; jr < nc; jr += NR) {
    const int nr = std::min(NR, nc - jr);
    float* dst = bp + ptrdiff_t(jr) * kc;
    if (!trans) {  // op(B)(p, j) = b[p·ldb + j]: NR neighbours per p
      const float* src = b + p0 * ldb + j0 + jr;
      __mmask16 mask[NV];
      for (int v = 0; v < NV; ++v) {
        int left = std::clamp(nr - 16 * v, 0, 16);
        mask[v] = __mmask16((1u << left) - 1);
      }
      for (int p = 0; p < kc; ++p)
        for (int v = 0; v < NV; ++v)
          _mm512_store_ps(dst + p * NR + 16 * v,
                          _mm512_maskz_loadu_ps(mask[v], src + p * ldb + 16 * v));
    } else {  // op(B)(p, j) = b[j·ldb + p]: K runs along memory, transpose
      const float* src = b + (j0 + jr) * ldb + p0;
      int p = 0;
      if (nr == NR)  // 16 k at a time across the whole panel width, so each
                     // line of Bp is completed while it is still in L1
        for (; p + 16 <= kc; p += 16)
          for (int jj = 0; jj < NR; jj += 8)
            transpose8x16(src + jj * ldb + p, ldb, dst + p * NR + jj, NR);
      for (int jj = 0; jj < NR; jj += 8) {
        const int rows = std::clamp(nr - jj, 0, 8);
        if (rows == 0) {
          for (int q = p; q < kc; ++q) _mm256_store_ps(dst + q * NR + jj, _mm256_setzero_ps());
          continue;
        }
        transpose_rows8(src + jj * ldb + p, ldb, rows, kc - p, dst + p * NR + jj, NR);
      }
    }
  }
}

// C tile (mr ≤ kMR rows, nr ≤ NR columns) = alpha · A·B + beta · C over kc,
// where the kMR × kc micro-panel of A is read at a[p·a_step + i] (kRowsA:
// a[i·a_step + p], A's own row-major rows) and the kc × NR one of B at
// b[p·b_step + j]. Packed panels are the case a_step = kMR, b_step = NR; the
// caller's matrices can be read in place when a whole panel lies inside them.
// kStoreT: the tile is of C^T, so element (i, j) is stored at c[j·ldc + i].
template <int NV, bool kRowsA, bool kStoreT>
HPMC_AVX512 void micro_kernel(int kc, const float* __restrict a, ptrdiff_t a_step,
                              const float* __restrict b, ptrdiff_t b_step, float* c, ptrdiff_t ldc,
                              int mr, int nr, float alpha, float beta) {
  __m512 acc[kMR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();

  const float* arow[kMR];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) arow[i] = a + (kRowsA ? i * a_step : i);
  for (int p = 0; p < kc; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512 av = _mm512_set1_ps(kRowsA ? arow[i][p] : a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    if (!kRowsA) a += a_step;
    b += b_step;
  }

  if (kStoreT) {
    store_transposed<NV>(acc, c, ldc, mr, nr, alpha, beta);
    return;
  }
  store_tile<NV>(acc, c, ldc, mr, nr, alpha, beta);
}

// Whether to read full panels of A and B in place instead of packing them.
// Packing costs a pass over the operand and pays back through reuse and
// orderly access. An A panel in place is kMR rows read along K (or, for a
// transposed A, kc lines of which it uses 32 bytes: fine while kc is short);
// either stays in L1 while the panel is reused. A B panel in place has its
// rows ldb apart, which crowds few cache sets when ldb is a power of two and
// the panel is re-read from L2 many times (M/kMR), so B is read in place only
// for short M (the batch of a linear layer). A transposed B is always packed.
struct Direct {
  bool a, b;
};

Direct choose_direct(bool trans_a, bool trans_b, int m, int k) {
  return Direct{!trans_a || k <= 256, !trans_b && m <= 96};
}

// The blocked product; kStoreT: `c` holds C^T (the caller swapped the
// operands, sgemm_avx512), so the tile at (i, j) is stored from c[j·ldc + i].
template <int NV, bool kStoreT>
HPMC_AVX512 void gemm_blocked(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                              const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb,
                              float beta, float* c, ptrdiff_t ldc) {
  constexpr int NR = 16 * NV;
  constexpr int NC = kNC / NR * NR;
  const Direct direct = choose_direct(trans_a, trans_b, m, k);
  // Near-equal K blocks: the cut depends on k alone (sgemm.h, determinism).
  const int kblocks = kblocks_for(k, kKC);
  const int kc_max = (k + kblocks - 1) / kblocks;
  const int nc_room = direct.b ? NR : (std::min(n, NC) + NR - 1) / NR * NR;
  const int mc_room = direct.a ? kMR : (std::min(m, kMC) + kMR - 1) / kMR * kMR;
  float* bp = b_pack.get(size_t(kc_max) * nc_room);
  float* ap = a_pack.get(size_t(kc_max) * mc_room);

  for (int jc = 0; jc < n; jc += NC) {
    const int nc = std::min(NC, n - jc);
    const int nc_full = nc / NR * NR;  // columns in whole panels
    for (int pc = 0; pc < k; pc += kc_max) {
      const int kc = std::min(kc_max, k - pc);
      const float beta_block = pc == 0 ? beta : 1.f;
      if (!direct.b)
        pack_b<NV>(trans_b, b, ldb, pc, kc, jc, nc, bp);
      else if (nc_full < nc)  // only the ragged last panel
        pack_b<NV>(trans_b, b, ldb, pc, kc, jc + nc_full, nc - nc_full, bp);
      for (int ic = 0; ic < m; ic += kMC) {
        const int mc = std::min(kMC, m - ic);
        const int mc_full = mc / kMR * kMR;
        if (!direct.a)
          pack_a(trans_a, a, lda, ic, mc, pc, kc, ap);
        else if (mc_full < mc)
          pack_a(trans_a, a, lda, ic + mc_full, mc - mc_full, pc, kc, ap);
        for (int ir = 0; ir < mc; ir += kMR) {
          const int mr = std::min(kMR, mc - ir);
          const bool a_packed = !direct.a || ir >= mc_full;
          const float* a_panel = !a_packed ? nullptr : direct.a ? ap : ap + ptrdiff_t(ir) * kc;
          for (int jr = 0; jr < nc; jr += NR) {
            const int nr = std::min(NR, nc - jr);
            const bool b_packed = !direct.b || jr >= nc_full;
            const float* b_panel =
                b_packed ? (direct.b ? bp : bp + ptrdiff_t(jr) * kc) : b + pc * ldb + jc + jr;
            const ptrdiff_t b_step = b_packed ? NR : ldb;
            float* c_tile = kStoreT ? c + (jc + jr) * ldc + ic + ir : c + (ic + ir) * ldc + jc + jr;
            if (a_packed)
              micro_kernel<NV, false, kStoreT>(kc, a_panel, kMR, b_panel, b_step, c_tile, ldc, mr,
                                               nr, alpha, beta_block);
            else if (trans_a)  // op(A)(i, p) = a[p·lda + i]
              micro_kernel<NV, false, kStoreT>(kc, a + pc * lda + ic + ir, lda, b_panel, b_step,
                                               c_tile, ldc, mr, nr, alpha, beta_block);
            else  // op(A)(i, p) = a[i·lda + p]
              micro_kernel<NV, true, kStoreT>(kc, a + (ic + ir) * lda + pc, lda, b_panel, b_step,
                                              c_tile, ldc, mr, nr, alpha, beta_block);
          }
        }
      }
    }
  }
}

template <bool kStoreT>
HPMC_AVX512 void gemm_dispatch(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                               const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb,
                               float beta, float* c, ptrdiff_t ldc) {
  switch (choose_nv(n)) {
    case 1:
      gemm_blocked<1, kStoreT>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      break;
    case 2:
      gemm_blocked<2, kStoreT>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      break;
    default:
      gemm_blocked<3, kStoreT>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace

void sgemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  // A transposed B (K along its rows) must be transposed while packing. When
  // it is the larger operand, compute C^T = op(B)^T · op(A)^T instead: then
  // the smaller one (or, if A is transposed too, neither) needs it. Each
  // element still sums fma(a, b, acc) over k in the same order, so the bits
  // do not change.
  const bool swap = trans_b && (trans_a || m < n);
  if (swap)
    gemm_dispatch<true>(!trans_b, !trans_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
  else
    gemm_dispatch<false>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace hpmc

#else  // not x86-64 with GCC or Clang: the avx512 path does not exist

namespace hpmc {

void sgemm_avx512(bool, bool, int, int, int, float, const float*, int, const float*, int, float,
                  float*, int) {
  throw RuntimeError("hpmc's AVX-512 SGEMM is not built for this CPU architecture");
}

}  // namespace hpmc

#endif
