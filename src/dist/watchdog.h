// watchdog.h — the timeout on collectives (dist/communicator.h): a thread
// that ends this rank when a collective has waited too long for the others.
//
// A host collective arms the watchdog for its duration (WatchScope). Device
// collectives return before the device has run them, so their backend
// registers a poller that reports its oldest unfinished collective and when
// it was enqueued. Once either has waited `timeout_s`, the thread prints
//   hpmc: error: rank R of N: <what> has waited T s for the other ranks ...
// and ends the process with exit code 1 (_exit: the main thread is blocked
// inside MPI or CUDA); mpirun then ends the other ranks.
#pragma once

#include <functional>
#include <string>

namespace hpmc::dist {

// Start the thread (once; timeout_s 0 starts nothing). `who` is "rank R of N".
void start_watchdog(int timeout_s, const std::string& who);
void stop_watchdog();
int watchdog_timeout();

// Arms the watchdog for a host wait named `what` (a string literal).
class WatchScope {
 public:
  explicit WatchScope(const char* what);
  ~WatchScope();
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;
};

// The device backend's report: the oldest collective it has enqueued that the
// device has not finished, as its name and the steady-clock second it was
// enqueued at; false when none is pending. Called from the watchdog thread.
using PendingPoller = std::function<bool(const char** what, double* since)>;
void set_pending_poller(PendingPoller p);

// Seconds on the steady clock (the watchdog's time base).
double watchdog_now();

}  // namespace hpmc::dist
