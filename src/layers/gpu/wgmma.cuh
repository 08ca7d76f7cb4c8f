// wgmma.cuh — Hopper's warpgroup matrix multiply (PTX wgmma.mma_async, sm_90a)
// for the channels-last bf16 convolutions (implicit_nhwc_kernels.cuh): the
// instruction, its shared-memory matrix descriptors and the fences around it.
//
// A warpgroup (4 consecutive warps, 128 threads) multiplies a 64×N tile of A
// by an N-column tile of B, k = 16 a step, both operands read by the tensor
// cores from shared memory, the FP32 accumulators in registers: thread (warp
// w, lane g·4 + t) holds rows 16w + g and 16w + g + 8, columns 8j + 2t and
// 8j + 2t + 1 of every 8-column group j (d[4j + 2h + e]: row 16w + g + 8h,
// column 8j + 2t + e), the mma.sync m16n8 fragment's layout repeated along n.
//
// Both operands here are "K-major" (each row of A, each column of B is 32
// consecutive bf16 values of k: 64 bytes) in the 64-byte swizzle: row r at
// byte 64·r of its tile, its 16-byte piece j stored at piece j ^ ((r >> 1) & 3);
// the tile starts on a 512-byte boundary (8 rows, the swizzle's period). The
// descriptor: the start address (>> 4), the stride between groups of 8 rows
// (512 bytes, >> 4) and the swizzle mode; the second 16 k of a row start 32
// bytes further (the address bits the swizzle reads are above those).
//
// Only an sm_90a build has the instructions (HPMC_WGMMA 1, e.g.
// -gencode=arch=compute_90a,code=sm_90a); elsewhere the wrappers trap, and the
// host asks a probe kernel of the same file whether the code it runs has them
// (conv2d_implicit_gemm.cu: nhwc_wgmma).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HPMC_WGMMA 1
#else
#define HPMC_WGMMA 0
#endif

namespace hpmc::gpu::wgmma {

#if HPMC_WGMMA
#define HPMC_WG_ASM(...) asm volatile(__VA_ARGS__)
#else
#define HPMC_WG_ASM(...) __trap()
#endif

// The descriptor of a K-major, 64-byte-swizzled tile at shared-space address
// `smem` (512-byte aligned for the first 16 k; + 32 bytes for the second).
__device__ __forceinline__ uint64_t desc_k64(uint32_t smem) {
  constexpr uint64_t kSbo = 512 >> 4, kSwizzle64 = 2;
  return uint64_t((smem & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (kSbo << 32) |
         (kSwizzle64 << 62);
}

// Orders this thread's earlier generic-proxy writes of shared memory (st.shared,
// cp.async once waited for) before later reads by the tensor cores (the async
// proxy); each writing thread, before the barrier that publishes the tile.
__device__ __forceinline__ void fence_proxy_async() {
  HPMC_WG_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Before the first wgmma that reads or writes accumulators other instructions
// touched.
__device__ __forceinline__ void fence() { HPMC_WG_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() {
  HPMC_WG_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N of this warpgroup's committed groups are pending.
template <int N>
__device__ __forceinline__ void wait() {
  HPMC_WG_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of d across the asynchronous
// multiply (after wait()).
__device__ __forceinline__ void fence_operands(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 × 128, FP32) += A (64 × 16, bf16) · B (16 × 128, bf16), both from
// shared memory (descriptors da, db), asynchronous until wait().
__device__ __forceinline__ void m64n128k16_bf16(float (&d)[64], uint64_t da, uint64_t db) {
  HPMC_WG_ASM(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "},\n"
      "%64, %65, 1, 1, 1, 0, 0;\n"
      "}\n"
      :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
        "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}

#undef HPMC_WG_ASM

}  // namespace hpmc::gpu::wgmma
