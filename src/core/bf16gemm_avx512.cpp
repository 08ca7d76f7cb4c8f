// bf16gemm_avx512.cpp — hpmc's bf16 GEMM for CPUs with AVX512_BF16 (see
// bf16gemm.h).
//
// C[M×N] = alpha · op(Â)[M×K] · op(B̂)[K×N] + beta · C, Â and B̂ the operands
// rounded to bf16 as they are packed, in sgemm_avx512.cpp's loops (with its
// tile store, transposes, K cut and pack buffers: gemm_avx512_common.h):
//
//   for jc in N by NC:
//     for pc in K's pairs by kc (near-equal blocks of at most kKC pairs):
//       pack op(B)[2pc.., jc..] → Bp: NR-wide micro-panels of pairs   (L2)
//       for ic in M by kMC:
//         pack op(A)[ic.., 2pc..] → Ap: kMR-tall micro-panels of pairs
//         for ir in MC by kMR:          an A micro-panel stays in L1
//           for jr in NC by NR:         B micro-panels stream from L2
//             micro-kernel: C[ir.., jr..] (kMR × NR) = Ap · Bp over kc pairs
//
// A packed element is a PAIR: the bf16 values of op(X) at k = 2p and 2p + 1
// in one 32-bit word (k = 2p in the low half), the layout vdpbf16ps reads:
// it adds a(i, 2p)·b(2p, j) + a(i, 2p+1)·b(2p+1, j) into FP32 lane j. Pair p
// of row i of an A micro-panel lies at Ap[p·kMR + i], of column j of a B
// micro-panel at Bp[p·NR + j]; the half pair after an odd K, rows past M and
// columns past N are zeros, so the kernel always runs whole tiles and only
// its store is masked.
//
// B can also be read through a Bf16ShiftedB's shifts and masks (bf16gemm.h:
// a convolution's column matrix straight from the image), by the same pack
// code with another row reader (bf16_pack_avx512.h): the same words.
//
// Rounding happens in the packs (their primitives: bf16_pack_avx512.h,
// shared with the AMX kernel), by vcvtne2ps2bf16 (bf16.h's rule). An
// operand whose K runs along memory (A, or B transposed) turns into pairs as
// it is converted, and then goes through sgemm's 8×16 register transposes
// (a pair is 32 bits, like a float). An operand whose K runs across rows (A
// transposed, or B) has its rows 2p and 2p + 1 converted together and their
// 16-bit halves interleaved (vpermw). Everything is packed, since everything
// must be converted, and C is stored as it is: with both transposes packed
// at the same cost, sgemm's C^T arrangement would gain nothing.
//
// The micro-kernel keeps a kMR × NR tile of C in kMR·NV zmm accumulators
// (NR = 16·NV, NV from N as in sgemm): per pair it loads NV vectors of Bp,
// broadcasts kMR words of Ap and issues kMR·NV vdpbf16ps, each two
// multiply-adds per lane. The first K block stores alpha·acc + beta·C, later
// blocks add alpha·acc onto C, so each element's sum order is fixed by K
// alone (bf16gemm.h, determinism).
//
// A prepacked A (Bf16PackedA, bf16gemm_avx512_pack_a) holds what the loops above
// pack into Ap for every (K block, M block), all blocks side by side: K
// block by K block (the same cut, from k alone), each block all M rows as
// pack_a lays out one M block, in kMR-row micro-panels. With mr = M rounded
// up to kMR, the block of kc2 pairs starting at pair pc2 is the mr·kc2 words
// at mr·pc2, and its M block at row ic the run at mr·pc2 + ic·kc2 (ic is a
// multiple of kMR), word for word the Ap that pack_a writes for it: the
// micro-kernel gets the same words in the same calls, hence the same bits.
// A product whose N takes several column blocks packs a small A that way
// itself, once, instead of once a column block (gemm_blocked).
//
// Every function here carries a target attribute instead of relying on the
// build's -march: bf16gemm.cpp calls in only when the CPU has AVX512_BF16.
#include "core/bf16gemm.h"
#include "core/error.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in
// GCC 13). Quieted for this file only, as in sgemm_avx512.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cstdint>

#include "core/bf16_pack_avx512.h"
#include "core/gemm_avx512_common.h"

namespace hpmc {

namespace {

using bf16_pack::pack_cols;
using bf16_pack::pack_cols8;
using bf16_pack::pack_rows8;
using bf16_pack::ShiftedRows;
using gemm_avx512::choose_nv;
using gemm_avx512::kblocks_for;
using gemm_avx512::kMR;
using gemm_avx512::scale_c;
using gemm_avx512::store_tile;

// sgemm's blocks in bytes: a pair is as wide as a float.
constexpr int kKC = 512;  // deepest K block in pairs: an A micro-panel is kMR·kKC·4 = 16 KiB
constexpr int kMC = 192;  // rows of a packed A block
constexpr int kNC = 384;  // columns of a packed B block: kKC·kNC·4 = 768 KiB, in L2

thread_local gemm_avx512::PackBuffer<uint32_t> a_pack, b_pack;

// Ap ← op(A)[i0 : i0+mc, p0 : p0+kc] as kMR-row micro-panels of pairs: pair
// p of row i of panel q lands at Ap[q·kMR·kc2 + p·kMR + i] (kc2 = (kc+1)/2).
HPMC_BF16 void pack_a(bool trans, const float* a, ptrdiff_t lda, int i0, int mc, int p0, int kc,
                      uint32_t* ap) {
  const int kc2 = (kc + 1) / 2;
  for (int ir = 0; ir < mc; ir += kMR) {
    const int mr = std::min(kMR, mc - ir);
    uint32_t* dst = ap + ptrdiff_t(ir) * kc2;
    if (trans)  // op(A)(i, p) = a[p·lda + i]: K across rows
      pack_cols8(a + p0 * lda + i0 + ir, lda, mr, kc, dst, kMR);
    else  // op(A)(i, p) = a[i·lda + p]: K along memory
      pack_rows8(a + (i0 + ir) * lda + p0, lda, mr, kc, dst, kMR);
  }
}

// Bp ← op(B)[p0 : p0+kc, j0 : j0+nc] as NR-column micro-panels of pairs: pair
// p of column j of panel q lands at Bp[q·NR·kc2 + p·NR + j]. B is read from
// b or, where sb is non-null, through its shifts and masks (the same words
// for the same values).
template <int NV>
HPMC_BF16 void pack_b(bool trans, const float* b, ptrdiff_t ldb, const Bf16ShiftedB* sb, int p0,
                      int kc, int j0, int nc, uint32_t* bp) {
  constexpr int NR = 16 * NV;
  const int kc2 = (kc + 1) / 2;
  for (int jr = 0; jr < nc; jr += NR) {
    const int nr = std::min(NR, nc - jr);
    uint32_t* dst = bp + ptrdiff_t(jr) * kc2;
    if (!trans) {  // op(B)(p, j) = b[p·ldb + j]: K across rows
      if (sb)
        pack_cols<NV>(ShiftedRows{sb, p0, j0 + jr}, nr, kc, dst, NR);
      else
        pack_cols<NV>(b + p0 * ldb + j0 + jr, ldb, nr, kc, dst, NR);
    } else {  // op(B)(p, j) = b[j·ldb + p]: K along memory, 8 columns at a time
      for (int jj = 0; jj < NR; jj += 8) {
        const int rows = std::clamp(nr - jj, 0, 8);
        if (sb)
          pack_rows8(ShiftedRows{sb, j0 + jr + jj, p0}, rows, kc, dst + jj, NR);
        else
          pack_rows8(b + (j0 + jr + jj) * ldb + p0, ldb, rows, kc, dst + jj, NR);
      }
    }
  }
}

// C tile (mr ≤ kMR rows, nr ≤ NR columns) = alpha · Ap·Bp + beta · C over
// kc2 pairs of packed micro-panels.
template <int NV>
HPMC_BF16 void micro_kernel(int kc2, const uint32_t* __restrict a, const uint32_t* __restrict b,
                            float* c, ptrdiff_t ldc, int mr, int nr, float alpha, float beta) {
  constexpr int NR = 16 * NV;
  __m512 acc[kMR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();

  for (int p = 0; p < kc2; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[i]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
    a += kMR;
    b += NR;
  }
  store_tile<NV>(acc, c, ldc, mr, nr, alpha, beta);
}

// The pairs in a K block: near-equal blocks of at most kKC pairs, the cut
// decided by k alone (bf16gemm.h).
inline int kc2_for(int k) {
  const int k2 = (k + 1) / 2;
  const int kblocks = kblocks_for(k2, kKC);
  return (k2 + kblocks - 1) / kblocks;
}

inline int m_room_for(int m) { return (m + kMR - 1) / kMR * kMR; }

// The largest A (in words) that a product over several column blocks packs
// whole, once, rather than block by block again for each column block: 4 MiB
// a thread, kept (a_pack only grows). Packing it whole writes half the bytes
// of A's floats once, where packing it per column block reads all of them
// for every block.
constexpr size_t kWholeAWords = size_t(1) << 20;

// ap ← all of op(A) (m × k) in the prepacked layout of the header.
// gemm_blocked's K blocks, each packed for all M rows at once: pack_a packs
// micro-panel by micro-panel, so one call over M writes what its calls per M
// block would, each at its block's place.
HPMC_BF16 void pack_a_whole(bool trans, const float* a, ptrdiff_t lda, int m, int k, uint32_t* ap) {
  const int k2 = (k + 1) / 2, kc2_max = kc2_for(k);
  const ptrdiff_t m_room = m_room_for(m);
  for (int pc2 = 0; pc2 < k2; pc2 += kc2_max) {
    const int kc2 = std::min(kc2_max, k2 - pc2);
    const int p0 = 2 * pc2, kc = std::min(2 * kc2, k - p0);
    pack_a(trans, a, lda, 0, m, p0, kc, ap + m_room * pc2);
  }
}

// The loops of the header. A comes packed (`a_packed`, laid out as the header
// says: a is then not read) or is packed from `a` (a_packed null): block by
// block as the loops reach it, or, where N takes several column blocks and A
// is at most kWholeAWords, whole before the loops, so that it is packed once
// rather than once a column block (the same words either way). B is read
// from `b` or, where `sb` is non-null, through its shifts and masks.
template <int NV>
HPMC_BF16 void gemm_blocked(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                            const float* a, ptrdiff_t lda, const uint32_t* a_packed,
                            const float* b, ptrdiff_t ldb, const Bf16ShiftedB* sb, float beta,
                            float* c, ptrdiff_t ldc) {
  constexpr int NR = 16 * NV;
  constexpr int NC = kNC / NR * NR;
  const int k2 = (k + 1) / 2;
  const int kc2_max = kc2_for(k);
  const int nc_room = (std::min(n, NC) + NR - 1) / NR * NR;
  const int mc_room = (std::min(m, kMC) + kMR - 1) / kMR * kMR;
  const ptrdiff_t m_room = m_room_for(m);
  uint32_t* bp = b_pack.get(size_t(kc2_max) * nc_room);
  uint32_t* ap = nullptr;
  if (!a_packed && n > NC && size_t(m_room) * size_t(k2) <= kWholeAWords) {
    ap = a_pack.get(size_t(m_room) * size_t(k2));
    pack_a_whole(trans_a, a, lda, m, k, ap);
    a_packed = ap;
  } else if (!a_packed) {
    ap = a_pack.get(size_t(kc2_max) * mc_room);
  }

  for (int jc = 0; jc < n; jc += NC) {
    const int nc = std::min(NC, n - jc);
    for (int pc2 = 0; pc2 < k2; pc2 += kc2_max) {
      const int kc2 = std::min(kc2_max, k2 - pc2);
      const int p0 = 2 * pc2, kc = std::min(2 * kc2, k - p0);  // the block's k values
      const float beta_block = pc2 == 0 ? beta : 1.f;
      pack_b<NV>(trans_b, b, ldb, sb, p0, kc, jc, nc, bp);
      for (int ic = 0; ic < m; ic += kMC) {
        const int mc = std::min(kMC, m - ic);
        const uint32_t* apc = ap;
        if (a_packed)
          apc = a_packed + m_room * pc2 + ptrdiff_t(ic) * kc2;
        else
          pack_a(trans_a, a, lda, ic, mc, p0, kc, ap);
        for (int ir = 0; ir < mc; ir += kMR) {
          const int mr = std::min(kMR, mc - ir);
          for (int jr = 0; jr < nc; jr += NR)
            micro_kernel<NV>(kc2, apc + ptrdiff_t(ir) * kc2, bp + ptrdiff_t(jr) * kc2,
                             c + (ic + ir) * ldc + jc + jr, ldc, mr, std::min(NR, nc - jr), alpha,
                             beta_block);
        }
      }
    }
  }
}

// The tile width from n, then the loops; A from `a_packed` where non-null, B
// from `sb` where non-null.
void gemm_dispatch(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                   int lda, const uint32_t* a_packed, const float* b, int ldb,
                   const Bf16ShiftedB* sb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.f) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  switch (choose_nv(n)) {
    case 1:
      gemm_blocked<1>(trans_a, trans_b, m, n, k, alpha, a, lda, a_packed, b, ldb, sb, beta, c,
                       ldc);
      break;
    case 2:
      gemm_blocked<2>(trans_a, trans_b, m, n, k, alpha, a, lda, a_packed, b, ldb, sb, beta, c,
                       ldc);
      break;
    default:
      gemm_blocked<3>(trans_a, trans_b, m, n, k, alpha, a, lda, a_packed, b, ldb, sb, beta, c,
                       ldc);
  }
}

}  // namespace

void bf16gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                     int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  gemm_dispatch(trans_a, trans_b, m, n, k, alpha, a, lda, nullptr, b, ldb, nullptr, beta, c,
                ldc);
}

void bf16gemm_avx512_shifted_b(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                               const float* a, int lda, const Bf16ShiftedB& b, float beta,
                               float* c, int ldc) {
  gemm_dispatch(trans_a, trans_b, m, n, k, alpha, a, lda, nullptr, nullptr, 0, &b, beta, c, ldc);
}

void bf16gemm_avx512_pack_a(bool trans_a, int m, int k, const float* a, int lda,
                            Bf16PackedA& out) {
  uint32_t* w =
      out.start(Bf16GemmPath::kAvx512Bf16, trans_a, m, k, bf16gemm_avx512_packed_a_words(m, k));
  if (w) pack_a_whole(trans_a, a, lda, m, k, w);
}

size_t bf16gemm_avx512_packed_a_words(int m, int k) {
  return m <= 0 || k <= 0 ? 0 : size_t(m_room_for(m)) * size_t((k + 1) / 2);
}

void bf16gemm_avx512_packed_a(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                              const float* b, int ldb, float beta, float* c, int ldc) {
  if (a.path != Bf16GemmPath::kAvx512Bf16)
    throw RuntimeError(str("bf16gemm_avx512_packed_a: A was packed for the ",
                           bf16gemm_path_name(a.path), " path"));
  gemm_dispatch(a.trans, trans_b, a.m, n, a.k, alpha, nullptr, 0, a.words.get(), b, ldb, nullptr,
                beta, c, ldc);
}

void bf16gemm_avx512_packed_a_shifted_b(const Bf16PackedA& a, bool trans_b, int n, float alpha,
                                        const Bf16ShiftedB& b, float beta, float* c, int ldc) {
  if (a.path != Bf16GemmPath::kAvx512Bf16)
    throw RuntimeError(str("bf16gemm_avx512_packed_a_shifted_b: A was packed for the ",
                           bf16gemm_path_name(a.path), " path"));
  gemm_dispatch(a.trans, trans_b, a.m, n, a.k, alpha, nullptr, 0, a.words.get(), nullptr, 0, &b,
                beta, c, ldc);
}

}  // namespace hpmc

#else  // not x86-64 with GCC or Clang: the avx512_bf16 path does not exist

namespace hpmc {

void bf16gemm_avx512(bool, bool, int, int, int, float, const float*, int, const float*, int,
                     float, float*, int) {
  throw RuntimeError("hpmc's AVX512_BF16 GEMM is not built for this CPU architecture");
}

void bf16gemm_avx512_pack_a(bool, int, int, const float*, int, Bf16PackedA&) {
  throw RuntimeError("hpmc's AVX512_BF16 GEMM is not built for this CPU architecture");
}

size_t bf16gemm_avx512_packed_a_words(int, int) { return 0; }

void bf16gemm_avx512_packed_a(const Bf16PackedA&, bool, int, float, const float*, int, float,
                              float*, int) {
  throw RuntimeError("hpmc's AVX512_BF16 GEMM is not built for this CPU architecture");
}

void bf16gemm_avx512_shifted_b(bool, bool, int, int, int, float, const float*, int,
                               const Bf16ShiftedB&, float, float*, int) {
  throw RuntimeError("hpmc's AVX512_BF16 GEMM is not built for this CPU architecture");
}

void bf16gemm_avx512_packed_a_shifted_b(const Bf16PackedA&, bool, int, float,
                                        const Bf16ShiftedB&, float, float*, int) {
  throw RuntimeError("hpmc's AVX512_BF16 GEMM is not built for this CPU architecture");
}

}  // namespace hpmc

#endif
