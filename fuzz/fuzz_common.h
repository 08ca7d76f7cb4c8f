// fuzz_common.h — what every hpmc fuzz target shares: the input as a file
// (hpmc's readers take paths) and the rule that any failure a reader reports
// is an hpmc::Error of one line.
//
// A target calls a reader through expect_clean(). An hpmc::Error whose message
// is one line and is not an internal check ("check `...` failed") is the
// reader doing its job. Anything else aborts, and libFuzzer keeps the input as
// a crash: another exception type (it would reach the user as exit code 1
// with a foreign message), a message of several lines, an HPMC_CHECK failure
// (a bug, not bad input), and whatever ASan or UBSan report on the way.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "core/error.h"

namespace hpmc::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "hpmc fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// A scratch file per process and name, in /dev/shm when there is one (the
// readers then cost no disk I/O), rewritten for every input.
inline std::string scratch_path(const std::string& name) {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0) return std::string("/dev/shm");
    return std::string(tmp && *tmp ? tmp : "/tmp");
  }();
  return dir + "/hpmc-fuzz-" + std::to_string(getpid()) + "-" + name;
}

inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = scratch_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  out.close();
  if (!out) finding("cannot write the scratch file " + path);
  return path;
}

// Runs f(); returns true when it finished, false when it threw a well-formed
// hpmc::Error; aborts on anything else (see the file comment).
template <typename F>
bool expect_clean(F&& f) {
  try {
    f();
    return true;
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.empty()) finding("an hpmc::Error with an empty message");
    if (msg.find('\n') != std::string::npos) finding("a message of several lines: " + msg);
    // HPMC_CHECK's messages, and only they, start with a source file's path.
    if (e.code() == ExitCode::kRuntime && msg.rfind(HPMC_FUZZ_SOURCE_DIR "/", 0) == 0)
      finding("an internal check failed: " + msg);
    return false;
  } catch (const std::exception& e) {
    finding(std::string("an exception that is not an hpmc::Error: ") + e.what());
  } catch (...) {
    finding("an exception of unknown type");
  }
}

// Splits an input in two at a 4-byte little-endian length prefix (clamped to
// what is there): the first part's length, then the first part, then the rest.
struct TwoParts {
  const uint8_t* a;
  size_t a_size;
  const uint8_t* b;
  size_t b_size;
};
inline TwoParts split_two(const uint8_t* data, size_t size) {
  uint32_t n = 0;
  for (size_t i = 0; i < 4 && i < size; ++i) n |= uint32_t(data[i]) << (8 * i);
  size_t head = size < 4 ? size : 4;
  size_t a = n < size - head ? n : size - head;
  return {data + head, a, data + head + a, size - head - a};
}

}  // namespace hpmc::fuzz
