#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/error.h"

namespace hpmc {

ProgressMode parse_progress_mode(const std::string& s, const std::string& flag) {
  if (s == "auto") return ProgressMode::kAuto;
  if (s == "bar") return ProgressMode::kBar;
  if (s == "lines") return ProgressMode::kLines;
  if (s == "quiet") return ProgressMode::kQuiet;
  throw UsageError(str(flag, " ", s, ": choose auto, bar, lines or quiet"));
}

ProgressMode resolve_progress_mode(ProgressMode m, ProgressMode otherwise) {
  if (m != ProgressMode::kAuto) return m;
  return isatty(STDOUT_FILENO) ? ProgressMode::kBar : otherwise;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string progress_bar(int64_t done, int64_t total, int width) {
  const double f = total > 0 ? double(done) / double(total) : 1.0;
  const int fill = std::max(0, std::min(width, int(f * width)));
  std::ostringstream bar;
  bar << "[" << std::string(size_t(fill), '=') << std::string(size_t(width - fill), ' ') << "] "
      << std::setw(3) << (total > 0 ? done * 100 / total : 100) << "%";
  return bar.str();
}

ProgressMeter::ProgressMeter(std::ostream& out, std::string label, int64_t total,
                             ProgressMode mode)
    : out_(out), label_(std::move(label)), total_(total),
      mode_(resolve_progress_mode(mode, ProgressMode::kQuiet)), start_(Clock::now()),
      last_draw_(start_), next_line_(std::max<int64_t>(1, total / 10)) {}

ProgressMeter::~ProgressMeter() { finish(); }

void ProgressMeter::update(int64_t done) {
  if (mode_ == ProgressMode::kLines) {
    if (done < next_line_ || done >= total_) return;
    out_ << "  " << label_ << " " << done << "/" << total_ << " (" << done * 100 / total_
         << "%)\n" << std::flush;
    const int64_t tenth = std::max<int64_t>(1, total_ / 10);
    while (next_line_ <= done) next_line_ += tenth;
  } else if (mode_ == ProgressMode::kBar) {
    const auto now = Clock::now();
    // A redraw costs a write to the terminal; five a second is smooth enough.
    if (done < total_ && drawn_ > 0 && now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    const double el = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0 ? el / double(done) * double(total_ - done) : -1;
    std::ostringstream line;
    line << "\r  " << label_ << " " << progress_bar(done, total_) << " " << done << "/" << total_
         << " ETA " << format_duration(eta) << "   ";
    out_ << line.str() << std::flush;
    drawn_ = line.str().size();
  }
}

void ProgressMeter::finish() {
  if (drawn_ == 0) return;
  out_ << "\r" << std::string(drawn_, ' ') << "\r" << std::flush;
  drawn_ = 0;
}

}  // namespace hpmc
