// fifo_testing.h — test that a reader refuses a FIFO instead of blocking on
// it, without letting a regression hang the test binary.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <string>

#include <gtest/gtest.h>

namespace hpmc::testing {

// Makes a FIFO at `path` (a failure is a test failure).
inline void make_fifo(const std::string& path) {
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path << ": " << std::strerror(errno);
}

// Runs `fn` on another thread and returns its result. If it is still running
// after `seconds` it is blocked on `fifo`: the FIFO is opened for writing and
// closed, which wakes a reader blocked in open() or read() with an end of
// file, and the test fails instead of hanging.
template <typename F>
auto returns_without_blocking(const std::string& fifo, F fn, int seconds = 10) -> decltype(fn()) {
  auto result = std::async(std::launch::async, fn);
  if (result.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "still blocked on the FIFO " << fifo << " after " << seconds << " s";
    for (int i = 0; i < 100 && result.wait_for(std::chrono::milliseconds(50)) !=
                                   std::future_status::ready; ++i) {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  return result.get();
}

}  // namespace hpmc::testing
