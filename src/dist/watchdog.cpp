// watchdog.cpp — the collective timeout thread of watchdog.h.
#include "dist/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace hpmc::dist {

namespace {

struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  bool stop = false;
  int timeout_s = 0;
  std::string who;
  PendingPoller poller;  // under mu
  // The armed host wait: its name and start (0: none). Set and cleared by the
  // thread that waits, read by the watchdog.
  std::atomic<const char*> host_what{nullptr};
  std::atomic<double> host_since{0};
};

State& state() {
  static State* s = new State;  // never destroyed: the thread may outlive static destructors
  return *s;
}

[[noreturn]] void expire(const State& s, const char* what, double waited) {
  std::fprintf(stderr,
               "hpmc: error: %s: %s has waited %.0f s for the other ranks "
               "(HPMC_COLLECTIVE_TIMEOUT=%d): another rank has stopped or hangs; ending this "
               "rank, and mpirun the job\n",
               s.who.c_str(), what, waited, s.timeout_s);
  std::fflush(stderr);
  _exit(1);
}

void run(State* s) {
  // Look about ten times per timeout, at least once a second.
  const double period = std::min(1.0, s->timeout_s / 10.0);
  std::unique_lock<std::mutex> lock(s->mu);
  while (!s->stop) {
    s->cv.wait_for(lock, std::chrono::duration<double>(period));
    if (s->stop) break;
    const double now = watchdog_now();
    const double since = s->host_since.load();
    const char* what = s->host_what.load();
    if (what && since > 0 && now - since >= s->timeout_s) expire(*s, what, now - since);
    if (s->poller) {
      const char* pending = nullptr;
      double at = 0;
      if (s->poller(&pending, &at) && now - at >= s->timeout_s) expire(*s, pending, now - at);
    }
  }
}

}  // namespace

double watchdog_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start_watchdog(int timeout_s, const std::string& who) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (timeout_s <= 0 || s.thread.joinable()) return;
  s.timeout_s = timeout_s;
  s.who = who;
  s.stop = false;
  s.thread = std::thread(run, &s);
}

void stop_watchdog() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.thread.joinable()) return;
    s.stop = true;
    s.poller = nullptr;
  }
  s.cv.notify_all();
  s.thread.join();
}

int watchdog_timeout() { return state().timeout_s; }

WatchScope::WatchScope(const char* what) {
  State& s = state();
  s.host_since.store(watchdog_now());
  s.host_what.store(what);
}

WatchScope::~WatchScope() {
  State& s = state();
  s.host_what.store(nullptr);
  s.host_since.store(0);
}

void set_pending_poller(PendingPoller p) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.poller = std::move(p);
}

}  // namespace hpmc::dist
