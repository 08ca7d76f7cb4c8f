// losses.cu — MseLossGPU and SoftmaxCrossEntropyGPU (see losses.h for the
// design: per-sample kernel → fixed-order single-block reduction that adds
// into acc on the device; no floating-point atomics; deferred bad-label
// report).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/gpu/losses.h"

namespace hpmc::gpu {

namespace {

// Threads of the single reduction block and of the per-sample MSE block. A
// power of two (the shared-memory trees halve it) and a compile-time
// constant: the reduction order, hence every bit of the result, depends on
// it and on nothing else.
constexpr int kReduceBlock = 256;
constexpr int kMseBlock = 256;
static_assert((kReduceBlock & (kReduceBlock - 1)) == 0, "tree reduction needs a power of two");
static_assert((kMseBlock & (kMseBlock - 1)) == 0, "tree reduction needs a power of two");

// Flag word per sample (cross-entropy): bit 0 = argmax equals the label,
// bit 1 = the label lies outside [0, K).
constexpr int kFlagCorrect = 1;
constexpr int kFlagBadLabel = 2;

// Device status of the cross-entropy loss: {set, sample, label, K}.
constexpr int kStatusInts = 4;

__device__ __forceinline__ double quiet_nan() { return __longlong_as_double(0x7ff8000000000000LL); }

// ---- MSE ---------------------------------------------------------------------------

// One block per sample s (grid = n): out[s] = Σ_e (p − t)² / per_sample, the
// squares summed in double — each thread a strided serial part, then a
// shared-memory tree, both in a fixed order. dp (if non-null) = gscale·(p − t)
// in float, the CPU's expression, so dp is bit-equal to MseLossCPU's.
__global__ void mse_sample_kernel(const float* __restrict__ p, const float* __restrict__ t,
                                  float* __restrict__ dp, size_t per_sample, float gscale,
                                  double* __restrict__ out) {
  __shared__ double part[kMseBlock];
  const size_t base = size_t(blockIdx.x) * per_sample;
  const float* ps = p + base;
  const float* ts = t + base;
  double sum = 0.0;
  for (size_t e = threadIdx.x; e < per_sample; e += kMseBlock) {
    const float pv = ps[e], tv = ts[e];
    const double d = double(pv) - double(tv);
    sum += d * d;
    if (dp) dp[base + e] = gscale * (pv - tv);
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kMseBlock / 2; half > 0; half >>= 1) {
    if (int(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0] / double(per_sample);
}

// ---- softmax cross-entropy -------------------------------------------------------

// One thread per sample (rows of K logits). The same computation, in the same
// order, as softmax_ce_loss in layers/cpu/softmax_ce_loss_ops.h: argmax with
// strict > (first maximum; a NaN never wins a comparison), m = z[argmax],
// Σ exp(z − m) in double in index order, loss = log Σ − (z[label] − m); the
// gradient (softmax − onehot) · inv_n with softmax rounded to float first.
// Only the device exp/log may differ from the host's in the last bit.
// A bad label: loss NaN, flag kFlagBadLabel, dz row 0, z[label] never read.
__global__ void ce_sample_kernel(const float* __restrict__ z, const int32_t* __restrict__ y,
                                 float* __restrict__ dz, int n, int k, float inv_n,
                                 double* __restrict__ loss, int* __restrict__ flags) {
  // 64-bit loop index: s + stride cannot overflow for any n ≤ INT_MAX.
  for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < n;
       s += (long long)gridDim.x * blockDim.x) {
    const float* zs = z + size_t(s) * size_t(k);
    float* ds = dz ? dz + size_t(s) * size_t(k) : nullptr;
    const int label = y[s];
    if (label < 0 || label >= k) {
      loss[s] = quiet_nan();
      flags[s] = kFlagBadLabel;
      if (ds)
        for (int j = 0; j < k; ++j) ds[j] = 0.0f;
      continue;
    }
    int arg = 0;
    for (int j = 1; j < k; ++j)
      if (zs[j] > zs[arg]) arg = j;
    const double m = double(zs[arg]);
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += exp(double(zs[j]) - m);
    loss[s] = log(sum) - (double(zs[label]) - m);
    flags[s] = arg == label ? kFlagCorrect : 0;
    if (ds) {
      const double inv_sum = 1.0 / sum;
      for (int j = 0; j < k; ++j) {
        const float softmax = float(exp(double(zs[j]) - m) * inv_sum);
        ds[j] = (softmax - (j == label ? 1.0f : 0.0f)) * inv_n;
      }
    }
  }
}

// ---- the shared reduction ----------------------------------------------------------

// ONE block of kReduceBlock threads (the launch must say so). Thread i sums
// loss[i], loss[i + B], ... serially; the block then combines the partials in
// a fixed tree. acc[0] += Σ loss. With flags (cross-entropy) also
// acc[1] += Σ correct (an exact integer count) and, if any sample's label was
// bad and no earlier call's error is still unreported, status ← {1, first bad
// sample, its label, k} (sticky until the host has reported it).
__global__ void loss_reduce_kernel(const double* __restrict__ loss, const int* __restrict__ flags,
                                   const int32_t* __restrict__ labels, int n, int k,
                                   double* __restrict__ acc, int* __restrict__ status) {
  __shared__ double s_loss[kReduceBlock];
  __shared__ long long s_correct[kReduceBlock];
  __shared__ int s_bad[kReduceBlock];
  const int tid = int(threadIdx.x);
  double l = 0.0;
  long long correct = 0;
  int bad = n;  // n = no bad sample
  for (long long i = tid; i < n; i += kReduceBlock) {
    l += loss[i];
    if (flags) {
      const int f = flags[i];
      correct += (f & kFlagCorrect) ? 1 : 0;
      if ((f & kFlagBadLabel) && i < bad) bad = int(i);
    }
  }
  s_loss[tid] = l;
  s_correct[tid] = correct;
  s_bad[tid] = bad;
  __syncthreads();
  for (int half = kReduceBlock / 2; half > 0; half >>= 1) {
    if (tid < half) {
      s_loss[tid] += s_loss[tid + half];
      s_correct[tid] += s_correct[tid + half];
      s_bad[tid] = min(s_bad[tid], s_bad[tid + half]);
    }
    __syncthreads();
  }
  if (tid == 0) {
    acc[0] += s_loss[0];
    if (flags) acc[1] += double(s_correct[0]);
    const int first_bad = s_bad[0];
    if (status && first_bad < n && status[0] == 0) {
      status[1] = first_bad;
      status[2] = labels[first_bad];
      status[3] = k;
      status[0] = 1;
    }
  }
}

// Grow-only device workspace of `n` per-sample doubles (and ints).
void ensure(Tensor& t, int n, DType dtype) {
  if (t.defined() && t.capacity() >= size_t(n)) {
    t.set_batch(n);
    return;
  }
  // Replacing the buffer frees the old one; cudaFree waits for the kernels
  // that may still use it.
  t = Tensor::empty(Shape(n, 1, 1, 1), dtype, Device::kGPU);
}

}  // namespace

// ---- MseLossGPU ------------------------------------------------------------------------

struct MseLossGPU::State {
  Tensor sample_loss;  // float64 (n, 1, 1, 1) on the GPU
};

MseLossGPU::MseLossGPU() : st_(std::make_unique<State>()) {}
MseLossGPU::~MseLossGPU() = default;

void MseLossGPU::compute_impl(const Tensor& pred, const Tensor& target, Tensor* dpred,
                              Tensor& acc) {
  const Shape& s = pred.shape();
  const int n = s.n;
  const size_t per = s.per_sample();
  if (n <= 0 || per == 0) return;  // adds 0, writes nothing (as the CPU)
  ensure(st_->sample_loss, n, DType::kF64);
  double* sample_loss = st_->sample_loss.data<double>();
  const float gscale = float(2.0 / (double(n) * double(per)));

  mse_sample_kernel<<<unsigned(n), kMseBlock>>>(pred.data<float>(), target.data<float>(),
                                                dpred ? dpred->data<float>() : nullptr, per,
                                                gscale, sample_loss);
  HPMC_CUDA_LAUNCH_CHECK("mse per-sample kernel");
  loss_reduce_kernel<<<1, kReduceBlock>>>(sample_loss, nullptr, nullptr, n, 0,
                                          acc.data<double>(), nullptr);
  HPMC_CUDA_LAUNCH_CHECK("mse reduction kernel");
}

// ---- SoftmaxCrossEntropyGPU ------------------------------------------------------------

struct SoftmaxCrossEntropyGPU::State {
  Tensor sample_loss;  // float64 (n, 1, 1, 1) on the GPU
  Tensor flags;        // int32 (n, 1, 1, 1) on the GPU
  Tensor status;       // int32 (4, 1, 1, 1) on the GPU, zeroed; sticky bad-label report
};

SoftmaxCrossEntropyGPU::SoftmaxCrossEntropyGPU() : st_(std::make_unique<State>()) {}
SoftmaxCrossEntropyGPU::~SoftmaxCrossEntropyGPU() = default;

void SoftmaxCrossEntropyGPU::check_status() {
  State& st = *st_;
  if (!st.status.defined()) return;
  // The one host copy of the status word: only where the caller syncs anyway.
  Tensor h = st.status.to_device(Device::kCPU);
  const int32_t* v = h.data<int32_t>();
  if (v[0] == 0) return;
  const int sample = v[1], label = v[2], k = v[3];
  // Report once: a caller that catches the error and goes on starts clean.
  st.status.fill_zero();
  throw DataError(str("softmax_cross_entropy: sample ", sample, " of a batch has label ", label,
                      ", outside [0, ", k, ") for a model with ", k,
                      " outputs; check the dataset's labels or the last layer's width (found "
                      "on the GPU; that batch's loss is NaN)"));
}

void SoftmaxCrossEntropyGPU::compute_impl(const Tensor& pred, const Tensor& target,
                                          Tensor* dpred, Tensor& acc) {
  const Shape& s = pred.shape();
  const int n = s.n, k = s.c;
  if (n <= 0) return;  // adds 0, writes nothing (as the CPU)
  State& st = *st_;
  if (!st.status.defined())
    st.status = Tensor::zeros(Shape(kStatusInts, 1, 1, 1), DType::kI32, Device::kGPU);
  ensure(st.sample_loss, n, DType::kF64);
  ensure(st.flags, n, DType::kI32);
  double* sample_loss = st.sample_loss.data<double>();
  int* flags = st.flags.data<int32_t>();
  const int32_t* labels = target.data<int32_t>();
  const float inv_n = float(1.0 / double(n));

  ce_sample_kernel<<<grid_for(size_t(n)), kBlock>>>(pred.data<float>(), labels,
                                                    dpred ? dpred->data<float>() : nullptr, n, k,
                                                    inv_n, sample_loss, flags);
  HPMC_CUDA_LAUNCH_CHECK("softmax_cross_entropy per-sample kernel");
  loss_reduce_kernel<<<1, kReduceBlock>>>(sample_loss, flags, labels, n, k, acc.data<double>(),
                                          st.status.data<int32_t>());
  HPMC_CUDA_LAUNCH_CHECK("softmax_cross_entropy reduction kernel");
}

HPMC_REGISTER_LOSS_GPU(MseLoss)
HPMC_REGISTER_LOSS_GPU(SoftmaxCrossEntropy)

}  // namespace hpmc::gpu
