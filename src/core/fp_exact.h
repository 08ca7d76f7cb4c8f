// fp_exact.h — a multiply and an add that no compiler contracts into a fused
// multiply-add, for element-wise formulas that must give the same bits on the
// CPU and the GPU.
//
// Both compilers may contract a·b + c into one FMA: nvcc by default
// (--fmad=true), GCC for C++ by default (-ffp-contract=fast) wherever the
// target has FMA (-march=native). On the device these helpers are the
// round-to-nearest intrinsics, which are never contracted; on the host the
// product passes through an empty asm statement that keeps it in a register,
// so the compiler cannot see a multiply feeding an add (it costs nothing but
// may keep a loop from vectorizing). Both sides then round every product and
// every sum once, in IEEE order. Division and sqrt are IEEE-correct on both
// sides already (nvcc's defaults -prec-div=true, -prec-sqrt=true; hpmc never
// builds with --use_fast_math).
#pragma once

#ifndef HPMC_HOST_DEVICE
#if defined(__CUDACC__)
#define HPMC_HOST_DEVICE __host__ __device__
#else
#define HPMC_HOST_DEVICE
#endif
#endif

#if defined(__CUDA_ARCH__)
#define HPMC_FP_BARRIER(v) ((void)0)
#elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define HPMC_FP_BARRIER(v) __asm__("" : "+x"(v))
#elif defined(__GNUC__) && defined(__aarch64__)
#define HPMC_FP_BARRIER(v) __asm__("" : "+w"(v))
#elif defined(__GNUC__)
#define HPMC_FP_BARRIER(v) __asm__("" : "+m"(v))
#else
#define HPMC_FP_BARRIER(v) ((void)0)
#endif

namespace hpmc {

HPMC_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  float p = a * b;
  HPMC_FP_BARRIER(p);
  return p;
#endif
}
HPMC_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
HPMC_HOST_DEVICE inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double p = a * b;
  HPMC_FP_BARRIER(p);
  return p;
#endif
}
HPMC_HOST_DEVICE inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

}  // namespace hpmc
