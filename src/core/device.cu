// device.cu — device primitives for the CUDA build: allocation, zeroing and
// the one explicit host<->device copy routine. Errors name the call, the CUDA
// error string and, for allocations, the bytes asked for and free.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace hpmc::gpu {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw RuntimeError(str("CUDA error in ", what, ": ", cudaGetErrorString(e)));
}
}  // namespace

namespace {
bool g_sync_debug = false;
}

[[noreturn]] void cuda_fail(cudaError_t e, const char* stmt, const char* file, int line) {
  cudaGetLastError();
  std::string hint;
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
    hint = "; is a CUDA GPU and its driver present? (`hpmc info` lists devices) or use --impl cpu";
  if (e == cudaErrorMemoryAllocation) hint = "; try a smaller batch size (--batch)";
  throw RuntimeError(str("CUDA error: ", cudaGetErrorString(e), " in `", stmt, "` at ", file, ":",
                         line, hint));
}

void check_launch(const char* what, const char* file, int line) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && g_sync_debug) e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    throw RuntimeError(str("CUDA error: ", cudaGetErrorString(e), " after ", what, " (", file, ":",
                           line, ")", g_sync_debug ? "" : "; rerun with --sync-debug to locate it"));
}

void set_sync_debug(bool on) { g_sync_debug = on; }
bool sync_debug() { return g_sync_debug; }

void check_after(const std::string& what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && g_sync_debug) e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    throw RuntimeError(str("CUDA error: ", cudaGetErrorString(e), " in ", what,
                           g_sync_debug ? "" : "; rerun with --sync-debug to locate it"));
}

void synchronize() { HPMC_CUDA_CHECK(cudaDeviceSynchronize()); }

bool compiled_with_cuda() { return true; }

DeviceMemory memory_info() {
  DeviceMemory m;
  HPMC_CUDA_CHECK(cudaMemGetInfo(&m.free, &m.total));
  return m;
}

void* event_create() {
  cudaEvent_t e;
  HPMC_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}
void event_destroy(void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
void event_record(void* e) { HPMC_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e))); }
float event_elapsed_ms(void* start, void* stop) {
  HPMC_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)));
  float ms = 0;
  HPMC_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start),
                                       static_cast<cudaEvent_t>(stop)));
  return ms;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void set_device(int index) { HPMC_CUDA_CHECK(cudaSetDevice(index)); }

std::vector<std::string> describe_devices() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {str("none (", cudaGetErrorString(e), ")")};
  }
  if (n == 0) return {"none (no CUDA device visible)"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
    out.push_back(str(i, ": ", p.name, ", compute ", p.major, ".", p.minor, ", ",
                      p.multiProcessorCount, " SMs, ", (p.totalGlobalMem >> 20), " MiB"));
  }
  return out;
}

DevicePeak device_peak() {
  int dev = 0;
  HPMC_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  int khz = 0;  // cudaDeviceProp::clockRate is gone in CUDA 13; the attribute stays
  HPMC_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  DevicePeak d;
  d.name = p.name;
  d.sms = p.multiProcessorCount;
  const bool half_rate = (p.major == 6 && p.minor == 0) || p.major == 7 ||
                         (p.major == 8 && p.minor == 0);
  d.fp32_lanes_per_sm = half_rate ? 64 : 128;
  d.clock_ghz = khz * 1e-6;
  d.fp32_flops = double(d.sms) * d.fp32_lanes_per_sm * 2.0 * khz * 1e3;
  if (p.major == 8 && p.minor == 0) d.tf32_per_sm_clock = 1024, d.bf16_per_sm_clock = 2048;
  if (p.major == 9 && p.minor == 0) d.tf32_per_sm_clock = 2048, d.bf16_per_sm_clock = 4096;
  d.tf32_flops = double(d.sms) * d.tf32_per_sm_clock * khz * 1e3;
  d.bf16_flops = double(d.sms) * d.bf16_per_sm_clock * khz * 1e3;
  return d;
}

std::shared_ptr<void> allocate_shared(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw RuntimeError(str("out of GPU memory: asked for ", bytes, " bytes with ", free_b,
                           " free of ", total_b, " (", cudaGetErrorString(e),
                           "); try a smaller batch size (--batch)"));
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void memset_zero(void* ptr, size_t bytes) { check(cudaMemset(ptr, 0, bytes), "cudaMemset"); }

void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  cudaMemcpyKind kind = cudaMemcpyDefault;
  if (dst_dev == Device::kCPU && src_dev == Device::kGPU) kind = cudaMemcpyDeviceToHost;
  if (dst_dev == Device::kGPU && src_dev == Device::kCPU) kind = cudaMemcpyHostToDevice;
  if (dst_dev == Device::kGPU && src_dev == Device::kGPU) kind = cudaMemcpyDeviceToDevice;
  check(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");
}

}  // namespace hpmc::gpu
