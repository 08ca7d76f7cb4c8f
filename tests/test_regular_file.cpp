// RegularFile (core/regular_file.h): every file hpmc reads is opened only if
// it is a regular file, and anything else is named for what it is — without
// ever blocking on a FIFO.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/regular_file.h"
#include "fifo_testing.h"
#include "testing.h"

namespace hpmc {
namespace {

namespace fs = std::filesystem;

TEST(RegularFile, OpensAndReadsARegularFileAndThroughALink) {
  testing::TempDir dir;
  std::ofstream(dir.file("a.txt")) << "hello, file";
  fs::create_symlink(dir.file("a.txt"), dir.file("link"));
  for (const char* name : {"a.txt", "link"}) {
    RegularFile f(dir.file(name));
    ASSERT_TRUE(f.ok()) << name << ": " << f.why();
    EXPECT_EQ(f.problem(), FileProblem::kNone);
    EXPECT_EQ(f.size(), 11u);
    std::string s;
    ASSERT_TRUE(f.read_up_to(s, 5));
    EXPECT_EQ(s, "hello");
    ASSERT_TRUE(f.read_up_to(s, 100));
    EXPECT_EQ(s, "hello, file");
  }
  EXPECT_EQ(check_regular_file(dir.file("a.txt")).problem, FileProblem::kNone);
}

TEST(RegularFile, NamesWhatIsThereInstead) {
  testing::TempDir dir;
  fs::create_directory(dir.file("sub"));
  fs::create_symlink(dir.file("loop_b"), dir.file("loop_a"));
  fs::create_symlink(dir.file("loop_a"), dir.file("loop_b"));
  fs::create_symlink(dir.file("nothing"), dir.file("dangling"));
  struct Case {
    std::string path;
    FileProblem problem;
    std::string why;
  };
  for (const Case& c : std::vector<Case>{
           {dir.file("sub"), FileProblem::kNotRegular, "is a directory, not a regular file"},
           {"/dev/null", FileProblem::kNotRegular, "is a character device, not a regular file"},
           {dir.file("loop_a"), FileProblem::kNotRegular,
            "is a symbolic link loop, not a regular file"},
           {dir.file("absent"), FileProblem::kMissing, "does not exist"},
           {dir.file("dangling"), FileProblem::kBrokenLink,
            "is a symbolic link to a file that does not exist"},
       }) {
    RegularFile f(c.path);
    EXPECT_FALSE(f.ok()) << c.path;
    EXPECT_EQ(f.fd(), -1) << c.path;
    EXPECT_EQ(f.problem(), c.problem) << c.path;
    EXPECT_EQ(f.why(), c.why) << c.path;
    EXPECT_EQ(check_regular_file(c.path).why, c.why) << c.path;
  }
}

TEST(RegularFile, RefusesAFifoWithoutBlocking) {
  testing::TempDir dir;
  const std::string fifo = dir.file("pipe");
  testing::make_fifo(fifo);
  std::string why = testing::returns_without_blocking(fifo, [&] {
    RegularFile f(fifo);
    return f.ok() ? std::string("opened") : f.why();
  });
  EXPECT_EQ(why, "is a FIFO, not a regular file");
}

}  // namespace
}  // namespace hpmc
