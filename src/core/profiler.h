// profiler.h — `--profile`: time each named region of a training step (a
// layer's forward or backward, the loss, SGD, the batch gather) and print a
// table of calls, total and average milliseconds and share of the step.
//
// On the GPU each region is bracketed by CUDA events and the times are
// collected once per step (which synchronizes: profiling perturbs the run a
// little, so its totals are for attribution, not for benchmarks). On the CPU
// a steady clock is used.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hpmc {

class Profiler {
 public:
  explicit Profiler(Device device) : device_(device) {}
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void begin(const std::string& name);
  void end();
  // Collect the step's timings (synchronizes on the GPU).
  void step_done();
  void print(std::ostream& os) const;

  struct Region {
    std::string name;
    long calls = 0;
    double ms = 0;  // total
  };
  // The regions timed so far, in the order they were first seen.
  std::vector<Region> regions() const;
  long steps() const { return steps_; }

 private:
  struct Stat {
    long calls = 0;
    double ms = 0;
    size_t order = 0;
  };
  struct Pending {
    std::string name;
    void* start = nullptr;
    void* stop = nullptr;
    double t0 = 0;
  };
  void* take_event();

  Device device_;
  std::map<std::string, Stat> stats_;
  std::vector<Pending> pending_;
  std::vector<void*> free_events_;
  long steps_ = 0;
};

// Brackets a region when a profiler is set; free otherwise.
class ProfileScope {
 public:
  ProfileScope(Profiler* p, const std::string& name) : p_(p) {
    if (p_) p_->begin(name);
  }
  ~ProfileScope() {
    if (p_) p_->end();
  }

 private:
  Profiler* p_;
};

}  // namespace hpmc
