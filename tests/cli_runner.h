// cli_runner.h — run the hpmc binary from the source directory and capture
// its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "testing.h"

namespace hpmc::testing {

struct CliResult {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `launcher` goes before the binary (e.g. "timeout 60").
inline CliResult run_hpmc_via(const std::string& launcher, const std::string& args) {
  TempDir tmp;
  std::string cmd = "cd '" + source_dir() + "' && " + launcher + " '" + hpmc_binary() + "' " +
                    args + " >'" + tmp.file("out") + "' 2>'" + tmp.file("err") + "' </dev/null";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp.file("out"));
  r.err = slurp(tmp.file("err"));
  return r;
}

// `env` goes before the binary too: "HPMC_MEMORY_LIMIT=1G", say.
inline CliResult run_hpmc(const std::string& args, const std::string& env = "") {
  return run_hpmc_via(env, args);
}

// With a time limit, for what used to hang (a read blocked on a FIFO): a
// hang ends the run with exit code 124 and fails the test.
inline CliResult run_hpmc_within(int seconds, const std::string& args) {
  return run_hpmc_via("timeout -k 5 " + std::to_string(seconds), args);
}

inline const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

}  // namespace hpmc::testing
