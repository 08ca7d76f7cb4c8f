// cp_async.cuh — asynchronous global → shared copies (cp.async, sm_80 and
// up; a plain load and store below that), shared by the implicit-GEMM engine
// (implicit_gemm_core.cuh and the kernels built on it) and the large-GEMM
// engine (gemm_large.cu). A copy whose source is not valid reads nothing
// and zero-fills its destination; its address must still be a readable one.
#pragma once

#include <cuda_runtime.h>

namespace hpmc::gpu {

// dst = valid ? *src : 0 (4 bytes). src must be a readable address even when
// !valid (the hardware reads nothing then, but the address stays in range).
__device__ __forceinline__ void copy4(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
#else
  *dst = valid ? __ldg(src) : 0.f;
#endif
}

// dst[0..1] = valid ? src[0..1] : 0; both 8-byte aligned.
__device__ __forceinline__ void copy8(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 8 : 0)
               : "memory");
#else
  *reinterpret_cast<float2*>(dst) =
      valid ? __ldg(reinterpret_cast<const float2*>(src)) : make_float2(0.f, 0.f);
#endif
}

// dst[0..3] = valid ? src[0..3] : 0; both 16-byte aligned.
__device__ __forceinline__ void copy16(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  *reinterpret_cast<float4*>(dst) =
      valid ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// dst[0..3] = the first `bytes` (0, 4, 8, 12 or 16) of src[0..3], the rest
// zero; both 16-byte aligned (a piece at a matrix's edge: the hardware reads
// only the bytes asked for).
__device__ __forceinline__ void copy16_partial(float* dst, const float* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
               : "memory");
#else
  for (int j = 0; j < 4; ++j) dst[j] = 4 * j < bytes ? __ldg(src + j) : 0.f;
#endif
}

__device__ __forceinline__ void copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most N of this thread's commit groups are still in flight.
template <int N>
__device__ __forceinline__ void copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace hpmc::gpu
