// conv2d_naive.cu — the `naive` kernel family: one thread per output
// element, every operand read straight from global memory, no shared memory,
// no atomics. It is the GPU oracle the other families are tested against,
// so each kernel is the textbook formula and nothing more.
//
// Mapping (every kernel is a 1-d grid-stride loop over its output, so any
// size fits the grid; each output element is written by exactly one thread):
//   forward          thread ↔ y[n,k,p,q]: Σ_{c,r,s} x[n,c,p·st−pad+r, q·st−pad+s]·w[k,c,r,s]
//                    (taps in the padding skipped), + b[k]; y overwritten.
//   backward_data    thread ↔ dx[n,c,h,w]: gathers Σ_{k,r,s} dy[n,k,p,q]·w[k,c,r,s] over the
//                    (r, s) for which h + pad − r = p·st with 0 ≤ p < P (and
//                    likewise for w, q); dx overwritten.
//   backward_params  thread ↔ dw[k,c,r,s]: Σ_{n,p,q} dy[n,k,p,q]·x[n,c,ih,iw]; dw += sum.
//                    thread ↔ db[k]: Σ_{n,p,q} dy[n,k,p,q]; db += sum.
//   gemm             thread ↔ C[i,j]: Σ_l op(A)[i,l]·op(B)[l,j], written or added to C.
// Every sum runs in float in a fixed order, so results are bit-identical run
// to run.
#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda_check.h"
#include "layers/gpu/conv2d_kernels.h"

namespace hpmc::gpu::naive {

namespace {

// Grid-stride loop over [0, n).
#define HPMC_FOR_EACH(i, n)                                                     \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);       \
       i += size_t(gridDim.x) * blockDim.x)

__global__ void forward_kernel(Conv2dShape s, const float* __restrict__ x,
                               const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y) {
  const size_t total = size_t(s.N) * s.K * s.P * s.Q;
  HPMC_FOR_EACH(idx, total) {
    const int q = int(idx % s.Q);
    const int p = int((idx / s.Q) % s.P);
    const int k = int((idx / (size_t(s.Q) * s.P)) % s.K);
    const int n = int(idx / (size_t(s.Q) * s.P * s.K));
    float acc = 0.f;
    for (int c = 0; c < s.C; ++c)
      for (int r = 0; r < s.R; ++r) {
        const int ih = p * s.stride - s.pad + r;
        if (ih < 0 || ih >= s.H) continue;
        for (int t = 0; t < s.S; ++t) {
          const int iw = q * s.stride - s.pad + t;
          if (iw < 0 || iw >= s.W) continue;
          acc += x[((size_t(n) * s.C + c) * s.H + ih) * s.W + iw] *
                 w[((size_t(k) * s.C + c) * s.R + r) * s.S + t];
        }
      }
    y[idx] = b ? acc + b[k] : acc;
  }
}

__global__ void backward_data_kernel(Conv2dShape s, const float* __restrict__ dy,
                                     const float* __restrict__ w, float* __restrict__ dx) {
  const size_t total = size_t(s.N) * s.C * s.H * s.W;
  HPMC_FOR_EACH(idx, total) {
    const int iw = int(idx % s.W);
    const int ih = int((idx / s.W) % s.H);
    const int c = int((idx / (size_t(s.W) * s.H)) % s.C);
    const int n = int(idx / (size_t(s.W) * s.H * s.C));
    float acc = 0.f;
    for (int k = 0; k < s.K; ++k)
      for (int r = 0; r < s.R; ++r) {
        // Output row p saw input row ih through tap r iff p·stride − pad + r == ih.
        const int ph = ih + s.pad - r;
        if (ph < 0 || ph % s.stride != 0) continue;
        const int p = ph / s.stride;
        if (p >= s.P) continue;
        for (int t = 0; t < s.S; ++t) {
          const int qw = iw + s.pad - t;
          if (qw < 0 || qw % s.stride != 0) continue;
          const int q = qw / s.stride;
          if (q >= s.Q) continue;
          acc += dy[((size_t(n) * s.K + k) * s.P + p) * s.Q + q] *
                 w[((size_t(k) * s.C + c) * s.R + r) * s.S + t];
        }
      }
    dx[idx] = acc;
  }
}

__global__ void backward_weight_kernel(Conv2dShape s, const float* __restrict__ x,
                                       const float* __restrict__ dy, float* __restrict__ dw) {
  const size_t total = size_t(s.K) * s.C * s.R * s.S;
  HPMC_FOR_EACH(idx, total) {
    const int t = int(idx % s.S);
    const int r = int((idx / s.S) % s.R);
    const int c = int((idx / (size_t(s.S) * s.R)) % s.C);
    const int k = int(idx / (size_t(s.S) * s.R * s.C));
    float acc = 0.f;
    for (int n = 0; n < s.N; ++n)
      for (int p = 0; p < s.P; ++p) {
        const int ih = p * s.stride - s.pad + r;
        if (ih < 0 || ih >= s.H) continue;
        for (int q = 0; q < s.Q; ++q) {
          const int iw = q * s.stride - s.pad + t;
          if (iw < 0 || iw >= s.W) continue;
          acc += dy[((size_t(n) * s.K + k) * s.P + p) * s.Q + q] *
                 x[((size_t(n) * s.C + c) * s.H + ih) * s.W + iw];
        }
      }
    dw[idx] += acc;
  }
}

__global__ void backward_bias_kernel(Conv2dShape s, const float* __restrict__ dy,
                                     float* __restrict__ db) {
  const size_t plane = size_t(s.P) * s.Q;
  HPMC_FOR_EACH(k, size_t(s.K)) {
    float acc = 0.f;
    for (int n = 0; n < s.N; ++n) {
      const float* d = dy + (size_t(n) * s.K + k) * plane;
      for (size_t i = 0; i < plane; ++i) acc += d[i];
    }
    db[k] += acc;
  }
}

__global__ void gemm_kernel(bool trans_a, bool trans_b, int m, int n, int k,
                            const float* __restrict__ a, int lda, const float* __restrict__ b,
                            int ldb, float* __restrict__ c, int ldc, bool accumulate) {
  const size_t total = size_t(m) * n;
  HPMC_FOR_EACH(idx, total) {
    const int i = int(idx / n);
    const int j = int(idx % n);
    float acc = 0.f;
    for (int l = 0; l < k; ++l) {
      // op(A)[i,l]: A is m×k (row i at a + i·lda) or, transposed, k×m.
      const float av = trans_a ? a[size_t(l) * lda + i] : a[size_t(i) * lda + l];
      // op(B)[l,j]: B is k×n or, transposed, n×k.
      const float bv = trans_b ? b[size_t(j) * ldb + l] : b[size_t(l) * ldb + j];
      acc += av * bv;
    }
    float* out = c + size_t(i) * ldc + j;
    *out = accumulate ? *out + acc : acc;
  }
}

#undef HPMC_FOR_EACH

}  // namespace

void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                    float* y) {
  const size_t total = size_t(s.N) * s.K * s.P * s.Q;
  if (total == 0) return;
  forward_kernel<<<grid_for(total), kBlock>>>(s, x, w, b, y);
  HPMC_CUDA_LAUNCH_CHECK("naive conv2d forward");
}

void conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx) {
  const size_t total = size_t(s.N) * s.C * s.H * s.W;
  if (total == 0) return;
  backward_data_kernel<<<grid_for(total), kBlock>>>(s, dy, w, dx);
  HPMC_CUDA_LAUNCH_CHECK("naive conv2d backward_data");
}

void conv2d_backward_params(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                            float* db) {
  const size_t wcount = s.weight_count();
  if (wcount > 0) {
    backward_weight_kernel<<<grid_for(wcount), kBlock>>>(s, x, dy, dw);
    HPMC_CUDA_LAUNCH_CHECK("naive conv2d backward weight");
  }
  if (db && s.K > 0) {
    backward_bias_kernel<<<grid_for(size_t(s.K)), kBlock>>>(s, dy, db);
    HPMC_CUDA_LAUNCH_CHECK("naive conv2d backward bias");
  }
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
          const float* b, int ldb, float* c, int ldc, bool accumulate) {
  const size_t total = size_t(m) * n;
  if (m <= 0 || n <= 0) return;
  gemm_kernel<<<grid_for(total), kBlock>>>(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                                           accumulate);
  HPMC_CUDA_LAUNCH_CHECK("naive gemm");
}

}  // namespace hpmc::gpu::naive
