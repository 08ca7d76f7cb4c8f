// device.h — the few device-memory primitives the core needs.
//
// Built without CUDA, these throw a RuntimeError that says so; the CUDA build
// implements them in src/core/device.cu. Host<->device copies go through
// gpu::copy only, so they are easy to find in a profile.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace hpmc {
enum class Device;

namespace gpu {

// True when this binary was built with CUDA (it may still find no device).
bool compiled_with_cuda();
// One line per visible CUDA device, or an explanation why there is none.
std::vector<std::string> describe_devices();
int device_count();
// Make device `index` the current one for this process (cudaSetDevice): a
// data-parallel rank takes its own GPU (dist/communicator.h) before any other
// GPU work. Without CUDA, a RuntimeError.
void set_device(int index);

// The current CUDA device and its FP32 peak: SMs × FP32 lanes per SM × 2
// (a fused multiply-add is two FLOPs) × the peak clock (cudaDevAttrClockRate).
// Lanes per SM come from the compute capability: 64 on 6.0, 7.x and 8.0,
// 128 on the others (an H100 SXM: 132 × 128 × 2 × 1.98 GHz ≈ 67 TFLOP/s).
// The dense tensor-core peaks (FP32 accumulation) count FLOPs per clock per
// SM from the compute capability: 1024 tf32 / 2048 bf16 on 8.0 (A100), 2048 /
// 4096 on 9.0 (H100: 132 × 4096 × 1.98 GHz ≈ 1070 TFLOP/s bf16 at the peak
// clock; NVIDIA's 989 is at 1.83 GHz); 0 (unknown: no fraction is shown) on
// the others, whose rates with FP32 accumulation differ by product.
struct DevicePeak {
  std::string name;
  int sms = 0;
  int fp32_lanes_per_sm = 0;
  double clock_ghz = 0;
  double fp32_flops = 0;  // FLOP/s
  int tf32_per_sm_clock = 0, bf16_per_sm_clock = 0;  // dense tensor-core FLOPs
  double tf32_flops = 0, bf16_flops = 0;              // FLOP/s; 0 where unknown
};
DevicePeak device_peak();

// Synchronize and check after every kernel (--sync-debug), so a fault is
// reported at the launch that caused it.
void set_sync_debug(bool on);
bool sync_debug();
// Check for a pending CUDA error after `what` (e.g. "layer 'conv1' forward");
// synchronizes first when sync-debug is on. A no-op without CUDA.
void check_after(const std::string& what);
// Wait for all queued GPU work (timing, logging); a no-op without CUDA.
void synchronize();

// CUDA events for timing (--profile): an opaque handle, recorded on the
// default stream; elapsed_ms synchronizes on `stop`.
void* event_create();
void event_destroy(void* e);
void event_record(void* e);
float event_elapsed_ms(void* start, void* stop);

// The current device's free and total memory in bytes (cudaMemGetInfo,
// which creates the context first, so `free` is what a run can still take).
struct DeviceMemory {
  size_t free = 0, total = 0;
};
DeviceMemory memory_info();

std::shared_ptr<void> allocate_shared(size_t bytes);
void memset_zero(void* ptr, size_t bytes);
void copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);

}  // namespace gpu
}  // namespace hpmc
