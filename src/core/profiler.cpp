#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>

#include "core/device.h"
#include "core/error.h"

namespace hpmc {

namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Profiler::~Profiler() {
  for (auto& p : pending_) {
    if (p.start) free_events_.push_back(p.start);
    if (p.stop) free_events_.push_back(p.stop);
  }
  for (void* e : free_events_) gpu::event_destroy(e);
}

void* Profiler::take_event() {
  if (free_events_.empty()) return gpu::event_create();
  void* e = free_events_.back();
  free_events_.pop_back();
  return e;
}

void Profiler::begin(const std::string& name) {
  Pending p;
  p.name = name;
  if (device_ == Device::kGPU) {
    p.start = take_event();
    gpu::event_record(p.start);
  } else {
    p.t0 = now_ms();
  }
  pending_.push_back(p);
}

void Profiler::end() {
  HPMC_CHECK(!pending_.empty() && !pending_.back().stop && pending_.back().t0 >= 0,
             "Profiler::end without begin");
  Pending& p = pending_.back();
  if (device_ == Device::kGPU) {
    p.stop = take_event();
    gpu::event_record(p.stop);
  } else {
    Stat& s = stats_[p.name];
    if (s.calls == 0) s.order = stats_.size();
    s.calls++;
    s.ms += now_ms() - p.t0;
    pending_.pop_back();
  }
}

void Profiler::step_done() {
  ++steps_;
  for (auto& p : pending_) {
    Stat& s = stats_[p.name];
    if (s.calls == 0) s.order = stats_.size();
    s.calls++;
    s.ms += gpu::event_elapsed_ms(p.start, p.stop);
    free_events_.push_back(p.start);
    free_events_.push_back(p.stop);
  }
  pending_.clear();
}

std::vector<Profiler::Region> Profiler::regions() const {
  std::vector<std::pair<std::string, Stat>> rows(stats_.begin(), stats_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
  std::vector<Region> out;
  for (const auto& r : rows) out.push_back({r.first, r.second.calls, r.second.ms});
  return out;
}

void Profiler::print(std::ostream& os) const {
  const std::vector<Region> rows = regions();
  double total = 0;
  for (const auto& r : rows) total += r.ms;
  char buf[160];
  std::snprintf(buf, sizeof buf, "profile (%s, %ld steps):\n  %-24s %8s %11s %10s %7s\n",
                device_name(device_), steps_, "region", "calls", "total ms", "avg ms", "share");
  os << buf;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "  %-24s %8ld %11.2f %10.4f %6.1f%%\n", r.name.c_str(),
                  r.calls, r.ms, r.ms / std::max(1L, r.calls), total > 0 ? 100 * r.ms / total : 0.0);
    os << buf;
  }
  std::snprintf(buf, sizeof buf, "  %-24s %8s %11.2f %10.4f\n", "step (sum)", "", total,
                steps_ ? total / steps_ : 0.0);
  os << buf;
}

}  // namespace hpmc
