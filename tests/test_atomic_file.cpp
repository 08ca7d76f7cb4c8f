// Crash-safe writes: the old file survives anything short of commit().
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "testing.h"

namespace hpmc {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t files_in(const std::filesystem::path& d) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(d)) (void)e, ++n;
  return n;
}

TEST(AtomicFile, WritesAndReplaces) {
  testing::TempDir t;
  write_file_atomic(t.file("a"), std::string("first"));
  EXPECT_EQ(slurp(t.file("a")), "first");
  write_file_atomic(t.file("a"), std::string("second"));
  EXPECT_EQ(slurp(t.file("a")), "second");
  EXPECT_EQ(files_in(t.path()), 1u);
}

TEST(AtomicFile, AbandonedWriteLeavesTheOldFile) {
  testing::TempDir t;
  write_file_atomic(t.file("a"), std::string("good"));
  {
    AtomicFile f(t.file("a"));
    f.write(std::string("half of a new fi"));
    EXPECT_TRUE(std::filesystem::exists(f.temp_path()));
  }  // no commit: as if an exception or a kill had come first
  EXPECT_EQ(slurp(t.file("a")), "good");
  EXPECT_EQ(files_in(t.path()), 1u);
}

TEST(AtomicFile, FullDiskFailsCleanlyAndKeepsTheOldFile) {
  // A file-size limit makes writes fail with EFBIG exactly as a full disk
  // fails them with ENOSPC; do it in a child so the limit stays there.
  testing::TempDir t;
  write_file_atomic(t.file("ckpt"), std::string("previous good checkpoint"));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    std::string big(1 << 20, 'x');
    try {
      write_file_atomic(t.file("ckpt"), big);
    } catch (const RuntimeError& e) {
      _exit(std::string(e.what()).find("unchanged") != std::string::npos ? 0 : 2);
    }
    _exit(1);  // the write should not have succeeded
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error raised, 2: error without the reassurance";
  EXPECT_EQ(slurp(t.file("ckpt")), "previous good checkpoint");
  EXPECT_EQ(files_in(t.path()), 1u) << "the temporary file was left behind";
}

TEST(AtomicFile, MissingDirectoryIsAClearError) {
  try {
    write_file_atomic("/nonexistent/dir/x.bin", std::string("x"));
    FAIL();
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir"), std::string::npos) << e.what();
  }
}

// A write killed before commit() leaves its temporary file; leftover_temp_files
// finds exactly those of one target, by the name AtomicFile gives them.
TEST(AtomicFile, LeftoverTempFilesOfOneTargetOnly) {
  testing::TempDir dir;
  const std::string target = dir.file("w.safetensors");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a writer killed mid-write: no destructor runs
    AtomicFile f(target);
    f.write("partial");
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::vector<std::string> left = leftover_temp_files(target);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(std::filesystem::path(left[0]).filename().string().rfind(".w.safetensors.tmp-", 0), 0u);

  for (const char* name : {".w.safetensors.tmp-Ab12Cd", "w.safetensors", ".w.safetensors.tmp-Ab12C",
                           ".w.safetensors.tmp-Ab12Cd7", ".w.safetensors.tmp-Ab_2Cd",
                           ".x.safetensors.tmp-Ab12Cd", "w.safetensors.tmp-Ab12Cd"})
    std::ofstream(dir.file(name)) << "x";
  std::filesystem::create_directory(dir.file(".w.safetensors.tmp-DIRxyz"));
  std::filesystem::create_symlink(target, dir.file(".w.safetensors.tmp-LNKxyz"));
  std::vector<std::string> want = {left[0], dir.file(".w.safetensors.tmp-Ab12Cd")};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(leftover_temp_files(target), want);
  EXPECT_TRUE(leftover_temp_files(dir.file("none/w.safetensors")).empty());
}

}  // namespace
}  // namespace hpmc
