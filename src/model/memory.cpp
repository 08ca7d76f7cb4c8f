#include "model/memory.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>

#include "core/device.h"
#include "core/error.h"
#include "model/model.h"

namespace hpmc {

namespace {

size_t sum(const std::vector<MemoryItem>& items) {
  size_t s = 0;
  for (const auto& i : items) s += i.bytes;
  return s;
}

// The n largest items, "what 1.2 GiB, what 300 MiB".
std::string largest(std::vector<MemoryItem> items, size_t n) {
  std::stable_sort(items.begin(), items.end(),
                   [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
  std::string s;
  for (size_t i = 0; i < items.size() && i < n; ++i) {
    if (items[i].bytes == 0) break;
    s += (s.empty() ? "" : ", ") + items[i].what + " " + format_bytes(double(items[i].bytes));
  }
  return s;
}

// "12345", "8G", "512M", "1.5T" → bytes; 0 when malformed.
size_t parse_size(const std::string& text) {
  if (text.empty()) return 0;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno || end == text.c_str() || !(v > 0) || !std::isfinite(v)) return 0;
  double scale = 1;
  const std::string unit = end;
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return 0;
  const double bytes = v * scale;
  return bytes >= 1.8e19 ? 0 : size_t(bytes);
}

// A number from a one-line file (cgroup files); 0 when absent or "max".
size_t read_number(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  return *end == '\0' ? size_t(v) : 0;
}

size_t mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  size_t kib = 0;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace

size_t MemoryPlan::host_bytes() const { return sum(host); }
size_t MemoryPlan::device_bytes() const { return sum(device); }

namespace {

std::string param_buffers_label(int optimizer_buffers) {
  return optimizer_buffers > 0 ? "parameters, gradients and optimizer state"
                               : "parameters and gradients";
}

}  // namespace

MemoryPlan plan_memory(const Model& model, int batch, const DataFootprint& data,
                       int optimizer_buffers) {
  MemoryPlan p;
  p.batch = batch;
  const bool gpu = model.device() == Device::kGPU;
  const size_t params = model.params().padded() * sizeof(float);
  const size_t input = model.input_shape().per_sample() * sizeof(float) + sizeof(int32_t);
  const size_t samples = data.train + data.test;
  const size_t dataset = samples * (data.sample_bytes + sizeof(int32_t));
  const size_t order = data.train * sizeof(int32_t);

  std::vector<MemoryItem>& on = gpu ? p.device : p.host;
  on.push_back({param_buffers_label(optimizer_buffers), size_t(2 + optimizer_buffers) * params});
  on.push_back({str("activations and their gradients at batch ", batch),
                model.activation_bytes(batch) + size_t(batch) * input});
  on.push_back({"layer workspace", model.workspace_bytes(batch)});
  p.host.push_back({"host copies of the parameters (initialisation, checkpoints)", 2 * params});
  p.host.push_back({"dataset", dataset + order});
  if (gpu) {
    p.device.push_back({"dataset on the GPU", dataset + order});
    // Kernels' scratch (split sums, staging) grows with the shapes met: a
    // reserve rather than an itemised count (memory.h).
    p.device.push_back({"reserve for kernel scratch (10%)", p.device_bytes() / 10});
  }
  return p;
}

MemoryBudget available_memory(bool device) {
  MemoryBudget b;
  b.host = mem_available();
  b.host_source = "MemAvailable";
  // cgroup v2, then v1: the limit less what the group already uses.
  size_t limit = read_number("/sys/fs/cgroup/memory.max");
  size_t used = read_number("/sys/fs/cgroup/memory.current");
  if (!limit) {
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    if (limit >= (size_t(1) << 60)) limit = 0;  // v1's "no limit"
  }
  if (limit) {
    const size_t room = limit > used ? limit - used : 0;
    if (!b.host || room < b.host) {
      b.host = room;
      b.host_source = "cgroup limit";
    }
  }
  if (const char* env = std::getenv("HPMC_MEMORY_LIMIT")) {
    const size_t cap = parse_size(env);
    if (!cap)
      throw UsageError(str("HPMC_MEMORY_LIMIT=", env,
                           ": expected a size in bytes, or a number with K, M, G or T (e.g. 8G)"));
    if (!b.host || cap < b.host) {
      b.host = cap;
      b.host_source = "HPMC_MEMORY_LIMIT";
    }
  }
  if (device) {
    const gpu::DeviceMemory m = gpu::memory_info();
    b.has_device = true;
    b.device = m.free;
  }
  return b;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : bytes < 10 ? "%.2f %s" : "%.1f %s", bytes,
                units[u]);
  return buf;
}

void print_memory(std::ostream& os, const MemoryPlan& plan, const MemoryBudget& budget) {
  os << "  memory: host " << format_bytes(double(plan.host_bytes()));
  if (budget.host) os << " of " << format_bytes(double(budget.host)) << " available";
  os << " (" << largest(plan.host, 3) << ")";
  if (!plan.device.empty()) {
    os << "; GPU " << format_bytes(double(plan.device_bytes()));
    if (budget.has_device) os << " of " << format_bytes(double(budget.device)) << " free";
    os << " (" << largest(plan.device, 3) << ")";
  }
  os << "\n";
}

void check_memory(const MemoryPlan& plan, const MemoryBudget& budget) {
  const std::string hint = str("; lower training.batch_size (now ", plan.batch,
                               ", --batch N) or the layers' widths (out_channels, out_features)");
  if (budget.host && plan.host_bytes() > budget.host)
    throw RuntimeError(str("this run needs ", format_bytes(double(plan.host_bytes())),
                           " of host memory (", largest(plan.host, 3), ") but ",
                           format_bytes(double(budget.host)), " are available (",
                           budget.host_source, ")", hint));
  if (budget.has_device && plan.device_bytes() > budget.device)
    throw RuntimeError(str("this run needs ", format_bytes(double(plan.device_bytes())),
                           " of GPU memory (", largest(plan.device, 3), ") but ",
                           format_bytes(double(budget.device)), " are free on the GPU", hint));
}

void check_parameter_memory(size_t padded_floats, bool on_gpu, int optimizer_buffers) {
  MemoryPlan p;
  const size_t bytes = padded_floats * sizeof(float);
  (on_gpu ? p.device : p.host)
      .push_back({param_buffers_label(optimizer_buffers), size_t(2 + optimizer_buffers) * bytes});
  p.host.push_back({"host copies of the parameters (initialisation, checkpoints)", 2 * bytes});
  const MemoryBudget b = available_memory(on_gpu);
  if (b.host && p.host_bytes() > b.host)
    throw RuntimeError(str("the model's parameters take ", format_bytes(double(p.host_bytes())),
                           " of host memory (", largest(p.host, 2), ") but ",
                           format_bytes(double(b.host)), " are available (", b.host_source,
                           "); use fewer or narrower layers (out_channels, out_features)"));
  if (b.has_device && p.device_bytes() > b.device)
    throw RuntimeError(str("the model's parameters take ", format_bytes(double(p.device_bytes())),
                           " of GPU memory (", param_buffers_label(optimizer_buffers), ") but ",
                           format_bytes(double(b.device)),
                           " are free on the GPU; use fewer or narrower layers (out_channels, "
                           "out_features)"));
}

}  // namespace hpmc
