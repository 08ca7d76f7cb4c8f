// elementwise_loss_kernels.cu — the kernels behind elementwise_loss_kernels.h: a
// per-sample block kernel per loss kind, and one fixed-order single-block
// reduction that adds into acc and records bce's first bad input.
//
// The per-element formulas restate layers/cpu/bce_loss_ops.h and
// l1_loss_ops.h in device code, operation for operation (double throughout
// for the loss terms and the bce gradients, rounded once to float).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/tensor.h"
#include "layers/gpu/elementwise_loss_kernels.h"

namespace hpmc::gpu {

namespace {

// Threads of the per-sample blocks and of the single reduction block: powers
// of two and compile-time constants, since the summation order (hence every
// bit of acc) depends on them and on nothing else.
constexpr int kSampleBlock = 256;
constexpr int kReduceBlock = 256;
static_assert((kSampleBlock & (kSampleBlock - 1)) == 0, "tree reduction needs a power of two");
static_assert((kReduceBlock & (kReduceBlock - 1)) == 0, "tree reduction needs a power of two");

// "No bad element" in the per-sample workspace.
constexpr long long kNoBad = 0x7fffffffffffffffLL;

__device__ __forceinline__ double quiet_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

// ---- the per-element terms (bce_loss_ops.h, l1_loss_ops.h) -------------------------

// std::max's NaN behaviour: a NaN `a` is kept.
__device__ __forceinline__ double dmax(double a, double b) { return a < b ? b : a; }

__device__ __forceinline__ double sigmoid_d(double x) {
  const double z = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + z) : z / (1.0 + z);
}

__device__ __forceinline__ bool target_ok(double t) { return t >= 0.0 && t <= 1.0; }
__device__ __forceinline__ bool pred_ok(double p) { return isnan(p) || (p >= 0.0 && p <= 1.0); }

// One element: its loss term, and its gradient (already scaled) in *g.
template <ElementwiseLoss K>
__device__ __forceinline__ double element(float pf, float tf, double inv_m, float l1_scale,
                                          float* g, bool* bad) {
  const double p = double(pf), t = double(tf);
  if constexpr (K == ElementwiseLoss::kBceWithLogits) {
    *g = float((sigmoid_d(p) - t) * inv_m);
    return dmax(p, 0.0) - p * t + log1p(exp(-fabs(p)));
  } else if constexpr (K == ElementwiseLoss::kBce) {
    if (!target_ok(t) || !pred_ok(p)) {
      *bad = true;
      *g = 0.0f;
      return quiet_nan();
    }
    *g = float((p - t) / dmax((1.0 - p) * p, double(1e-12f)) * inv_m);
    return (t - 1.0) * dmax(log(1.0 - p), -100.0) - t * dmax(log(p), -100.0);
  } else {
    *g = pf > tf ? l1_scale : (pf < tf ? -l1_scale : 0.0f);
    return fabs(p - t);
  }
}

// One block per sample s: loss[s] = Σ_e term / per_sample and bad[s] = the
// sample's first bad element (kNoBad if none); dp (if non-null) per element.
template <ElementwiseLoss K>
__global__ void sample_kernel(const float* __restrict__ p, const float* __restrict__ t,
                              float* __restrict__ dp, size_t per_sample, double inv_m,
                              float l1_scale, double* __restrict__ loss,
                              long long* __restrict__ bad) {
  __shared__ double s_sum[kSampleBlock];
  __shared__ long long s_bad[kSampleBlock];
  const int tid = int(threadIdx.x);
  const size_t base = size_t(blockIdx.x) * per_sample;
  double sum = 0.0;
  long long first_bad = kNoBad;
  for (size_t e = size_t(tid); e < per_sample; e += kSampleBlock) {
    float g;
    bool is_bad = false;
    sum += element<K>(p[base + e], t[base + e], inv_m, l1_scale, &g, &is_bad);
    if (is_bad && first_bad == kNoBad) first_bad = (long long)e;  // e rises: the first
    if (dp) dp[base + e] = g;
  }
  s_sum[tid] = sum;
  s_bad[tid] = first_bad;
  __syncthreads();
  for (int half = kSampleBlock / 2; half > 0; half >>= 1) {
    if (tid < half) {
      s_sum[tid] += s_sum[tid + half];
      s_bad[tid] = min(s_bad[tid], s_bad[tid + half]);
    }
    __syncthreads();
  }
  if (tid == 0) {
    loss[blockIdx.x] = s_sum[0] / double(per_sample);
    bad[blockIdx.x] = s_bad[0];
  }
}

// ONE block of kReduceBlock threads: acc[0] += Σ loss (thread i sums loss[i],
// loss[i + B], … serially, then a fixed tree). With a status word, the first
// sample with a bad element is recorded unless a report is pending.
__global__ void reduce_kernel(const double* __restrict__ loss, const long long* __restrict__ bad,
                              int n, size_t per_sample, const float* __restrict__ p,
                              const float* __restrict__ t, double* __restrict__ acc,
                              int32_t* __restrict__ status) {
  __shared__ double s_loss[kReduceBlock];
  __shared__ int s_first[kReduceBlock];
  const int tid = int(threadIdx.x);
  double l = 0.0;
  int first = n;  // n = no bad sample
  for (long long i = tid; i < n; i += kReduceBlock) {
    l += loss[i];
    if (bad[i] != kNoBad && i < first) first = int(i);
  }
  s_loss[tid] = l;
  s_first[tid] = first;
  __syncthreads();
  for (int half = kReduceBlock / 2; half > 0; half >>= 1) {
    if (tid < half) {
      s_loss[tid] += s_loss[tid + half];
      s_first[tid] = min(s_first[tid], s_first[tid + half]);
    }
    __syncthreads();
  }
  if (tid == 0) {
    acc[0] += s_loss[0];
    const int s = s_first[0];
    if (status && s < n && status[0] == 0) {
      const unsigned long long e = (unsigned long long)bad[s];
      const size_t i = size_t(s) * per_sample + size_t(e);
      const bool is_target = !target_ok(double(t[i]));
      const float value = is_target ? t[i] : p[i];
      status[1] = s;
      status[2] = int32_t(uint32_t(e & 0xffffffffu));
      status[3] = int32_t(uint32_t(e >> 32));
      status[4] = is_target ? 1 : 0;
      status[5] = __float_as_int(value);
      status[0] = 1;
    }
  }
}

template <ElementwiseLoss K>
void launch_samples(const float* pred, const float* target, float* dpred, int n, size_t per,
                    double inv_m, float l1_scale, double* loss, long long* bad) {
  sample_kernel<K><<<unsigned(n), kSampleBlock>>>(pred, target, dpred, per, inv_m, l1_scale,
                                                  loss, bad);
}

const char* loss_name(ElementwiseLoss kind) {
  switch (kind) {
    case ElementwiseLoss::kBceWithLogits: return "bce_with_logits";
    case ElementwiseLoss::kBce: return "bce";
    case ElementwiseLoss::kL1: return "l1";
  }
  return "?";
}

}  // namespace

size_t elementwise_loss_workspace_bytes(int n) {
  return n > 0 ? size_t(n) * (sizeof(double) + sizeof(long long)) : 0;
}

void elementwise_loss(ElementwiseLoss kind, const float* pred, const float* target, float* dpred,
                      int n, size_t per_sample, void* workspace, double* acc, int32_t* status) {
  if (n <= 0 || per_sample == 0) return;  // adds 0, writes nothing (as the CPU)
  double* loss = static_cast<double*>(workspace);
  long long* bad = reinterpret_cast<long long*>(loss + n);
  const double m = double(n) * double(per_sample);
  const double inv_m = 1.0 / m;
  const float l1_scale = float(1.0 / m);
  switch (kind) {
    case ElementwiseLoss::kBceWithLogits:
      launch_samples<ElementwiseLoss::kBceWithLogits>(pred, target, dpred, n, per_sample, inv_m,
                                                      l1_scale, loss, bad);
      break;
    case ElementwiseLoss::kBce:
      launch_samples<ElementwiseLoss::kBce>(pred, target, dpred, n, per_sample, inv_m, l1_scale,
                                            loss, bad);
      break;
    case ElementwiseLoss::kL1:
      launch_samples<ElementwiseLoss::kL1>(pred, target, dpred, n, per_sample, inv_m, l1_scale,
                                           loss, bad);
      break;
  }
  const std::string name = loss_name(kind);
  HPMC_CUDA_LAUNCH_CHECK((name + " per-sample kernel").c_str());
  reduce_kernel<<<1, kReduceBlock>>>(loss, bad, n, per_sample, pred, target, acc,
                                     kind == ElementwiseLoss::kBce ? status : nullptr);
  HPMC_CUDA_LAUNCH_CHECK((name + " reduction kernel").c_str());
}

LossStatus take_loss_status(int32_t* status) {
  int32_t h[kLossStatusInts];
  copy(h, Device::kCPU, status, Device::kGPU, sizeof h);
  LossStatus st;
  if (h[0] == 0) return st;
  memset_zero(status, sizeof h);
  st.bad = true;
  st.sample = h[1];
  st.element = size_t(uint32_t(h[2])) | (size_t(uint32_t(h[3])) << 32);
  st.is_target = h[4] != 0;
  std::memcpy(&st.value, &h[5], sizeof st.value);
  return st;
}

}  // namespace hpmc::gpu
