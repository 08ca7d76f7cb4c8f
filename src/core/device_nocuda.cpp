// device_nocuda.cpp — device primitives for a build without CUDA: every call
// explains that this binary has no GPU support.
#ifndef HPMC_WITH_CUDA

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace hpmc::gpu {

namespace {
[[noreturn]] void no_cuda() {
  throw RuntimeError(
      "this hpmc was built without CUDA, so it has no GPU support; use --impl cpu, or rebuild "
      "on a machine with the CUDA toolkit (cmake -DHPMC_CUDA=ON)");
}
}  // namespace

bool compiled_with_cuda() { return false; }
std::vector<std::string> describe_devices() { return {"none (built without CUDA)"}; }
int device_count() { return 0; }
void set_device(int) { no_cuda(); }
DevicePeak device_peak() { no_cuda(); }
void set_sync_debug(bool) {}
bool sync_debug() { return false; }
void check_after(const std::string&) {}
void synchronize() {}
void* event_create() { no_cuda(); }
void event_destroy(void*) {}
void event_record(void*) { no_cuda(); }
float event_elapsed_ms(void*, void*) { no_cuda(); }
DeviceMemory memory_info() { no_cuda(); }
std::shared_ptr<void> allocate_shared(size_t) { no_cuda(); }
void memset_zero(void*, size_t) { no_cuda(); }
void copy(void*, Device, const void*, Device, size_t) { no_cuda(); }

}  // namespace hpmc::gpu

#endif
