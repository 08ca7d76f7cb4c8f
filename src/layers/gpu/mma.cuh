// mma.cuh — the tensor-core instructions hpmc uses (PTX mma.sync with FP32
// accumulators) and the roundings of FP32 values to their operand formats,
// shared by the tensor-core GEMM engine (gemm_tc.cu), the tensor-core main
// loop of the implicit-GEMM family (implicit_gemm_tc.cuh), its channels-last
// bf16 kernels (implicit_nhwc_kernels.cuh) and the fused MLP step's tf32 and
// bf16 kernels (mlp_step.cu); ldmatrix too.
//
// mma.sync with tf32 or bf16 operands and cvt to tf32 need sm_80 and up. A
// build for older targets (CMAKE_CUDA_ARCHITECTURES 75 …) compiles the
// wrappers as traps; the host code refuses such devices before any launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define HPMC_MMA 0
#else
#define HPMC_MMA 1
#endif

namespace hpmc::gpu::mma {

// x rounded to tf32 (cvt.rna: to nearest, ties away from zero; 10 stored
// mantissa bits), in a 32-bit register.
__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r = 0;
#if HPMC_MMA
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
  return r;
}

// lo and hi rounded to bf16 (to nearest even), lo in the lower half: the
// order the fragments hold consecutive k in.
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lower half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint16_t bf16(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// The instructions, or a trap where there are none (HPMC_MMA 0).
#if HPMC_MMA
#define HPMC_MMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define HPMC_MMA_ASM(...) __trap()
#endif

// d += a·b over one 16×8 tile with a in 4 registers and b in 2: k = 8 in
// tf32, k = 16 in bf16 (the same fragment shapes, another instruction).
#define HPMC_MMA_A4B2(NAME, SHAPE_TYPES)                                               \
  __device__ __forceinline__ void NAME(float(&d)[4], const uint32_t(&a)[4],           \
                                       const uint32_t(&b)[2]) {                       \
    HPMC_MMA_ASM("mma.sync.aligned." SHAPE_TYPES                                      \
                 " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"           \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])); \
  }
HPMC_MMA_A4B2(tf32_m16n8k8, "m16n8k8.row.col.f32.tf32.tf32.f32")
HPMC_MMA_A4B2(bf16_m16n8k16, "m16n8k16.row.col.f32.bf16.bf16.f32")
#undef HPMC_MMA_A4B2

// d += a·b over one 16×8 tile, k = 8 (bf16: a 2 registers, b 1).
__device__ __forceinline__ void bf16_m16n8k8(float (&d)[4], const uint32_t (&a)[2],
                                             uint32_t b) {
  HPMC_MMA_ASM(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}

// ldmatrix .x4: four 8×8 matrices of 16-bit values, each row 16 bytes at the
// shared-memory address one lane of its group of 8 gives (lanes 8i … 8i+7:
// matrix i); lane l receives word l%4 of row l/4 of each (with trans, of the
// matrices transposed), which is an mma fragment's layout. smem: a 32-bit
// shared-space address (__cvta_generic_to_shared), or a pointer into shared
// memory.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&d)[4], uint32_t smem, bool trans = false) {
  if (trans)
    HPMC_MMA_ASM("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(smem));
  else
    HPMC_MMA_ASM("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(smem));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&d)[4], const void* p, bool trans = false) {
  ldmatrix_x4(d, static_cast<uint32_t>(__cvta_generic_to_shared(p)), trans);
}

#undef HPMC_MMA_ASM

}  // namespace hpmc::gpu::mma
