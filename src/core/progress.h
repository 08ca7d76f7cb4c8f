// progress.h — progress display for long loops: a bar redrawn in place with
// an ETA when stdout is a terminal, plain lines about every 10% otherwise
// (or on request), or nothing.
//
// The trainer draws its own epoch bar from these pieces (it prints the loss
// beside it); `hpmc features` uses ProgressMeter as it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace hpmc {

enum class ProgressMode { kAuto, kBar, kLines, kQuiet };

// "auto", "bar", "lines" or "quiet"; anything else is a UsageError naming `flag`.
ProgressMode parse_progress_mode(const std::string& s, const std::string& flag = "--progress");
// kAuto resolved: kBar when stdout is a terminal, else `otherwise`.
ProgressMode resolve_progress_mode(ProgressMode m, ProgressMode otherwise);

// "1:05" or "2:01:05"; "--:--" for a time not known (negative, NaN, infinite).
std::string format_duration(double seconds);
// "[=========                     ]  30%": `width` cells filled in proportion
// to done / total, then the percentage right-aligned in 3 characters.
std::string progress_bar(int64_t done, int64_t total, int width = 30);

// Counts `done` out of `total` items for a loop labelled `label`:
//   bar:   "\r  <label> [====      ]  40% 400/1000 ETA 0:12", at most every
//          0.2 s and at the end, cleared by finish();
//   lines: "  <label> 400/1000 (40%)" each time another tenth is passed;
//   quiet: nothing.
class ProgressMeter {
 public:
  ProgressMeter(std::ostream& out, std::string label, int64_t total, ProgressMode mode);
  ~ProgressMeter();
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  void update(int64_t done);
  // Clears the bar (a line of spaces, then back to the line's start), so the
  // next output starts at a clean line. Called by the destructor if not before.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& out_;
  std::string label_;
  int64_t total_;
  ProgressMode mode_;
  Clock::time_point start_, last_draw_;
  int64_t next_line_ = 0;  // lines: the count that prints the next line
  size_t drawn_ = 0;       // bar: characters of the last bar drawn (0: none on screen)
};

}  // namespace hpmc
