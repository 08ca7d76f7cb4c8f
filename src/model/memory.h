// memory.h — what a run needs in host and device memory, worked out before
// anything large is allocated, and checked against what the machine has.
//
// The plan counts every buffer hpmc allocates for the run's size: the
// parameter and gradient buffers (params.h) and the optimizer's state
// buffers of the same size, the host copies that initialisation and
// checkpoints make of them, the activations and their
// gradients for the largest batch (Model::activation_bytes), the batch being
// fed, the layers' scratch (Model::workspace_bytes) and the dataset (as
// loaded: uint8 or float32 pixels and int32 labels, on the GPU a second copy). GPU
// kernels' own scratch buffers grow with the shapes they meet and are not
// counted one by one; the device plan reserves 10% of its total for them.
//
// Available memory: on the host, the kernel's MemAvailable, lowered to the
// cgroup's limit less its usage when the process runs in one (containers,
// systemd slices), and to HPMC_MEMORY_LIMIT when that is set (bytes, or a
// number with K, M, G or T); on the device, cudaMemGetInfo's free bytes. A
// plan larger than either is refused with one line that names the largest
// items and what to lower.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace hpmc {

class Model;

struct MemoryItem {
  std::string what;
  size_t bytes = 0;
};

struct MemoryPlan {
  std::vector<MemoryItem> host, device;  // device is empty for a CPU run
  int batch = 0;
  size_t host_bytes() const;
  size_t device_bytes() const;
};

// Samples the run holds in memory, per split, and the bytes of one sample.
struct DataFootprint {
  size_t train = 0, test = 0;
  size_t sample_bytes = 0;  // the pixels of one image as held (uint8, or float32 for npy)
};

// optimizer_buffers: the optimizer's state buffers of the parameter buffer's
// size (optim/optimizer.h optimizer_state_buffers: 0, 1 or 2).
MemoryPlan plan_memory(const Model& model, int batch, const DataFootprint& data,
                       int optimizer_buffers);

struct MemoryBudget {
  size_t host = 0;
  std::string host_source;  // "MemAvailable", "cgroup limit", "HPMC_MEMORY_LIMIT"
  bool has_device = false;
  size_t device = 0;
};

// What this machine (and, with `device`, the current GPU) has free now.
MemoryBudget available_memory(bool device);

// "12.3 MiB", "1.50 GiB".
std::string format_bytes(double bytes);

// One line for the model table: the totals, their largest items and what is
// available.
void print_memory(std::ostream& os, const MemoryPlan& plan, const MemoryBudget& budget);

// Throws a RuntimeError (exit code 1) when the plan does not fit the budget,
// naming the bytes needed and available, the largest items, and what to
// lower (training.batch_size, the layers' widths).
void check_memory(const MemoryPlan& plan, const MemoryBudget& budget);

// The early check Model::build makes before it allocates the parameter
// buffers (parameters, gradients and the optimizer's state buffers, each of
// `padded_floats` floats, on `on_gpu`'s device; two host copies): a model
// too large for the machine is refused before any of it is allocated.
void check_parameter_memory(size_t padded_floats, bool on_gpu, int optimizer_buffers);

}  // namespace hpmc
