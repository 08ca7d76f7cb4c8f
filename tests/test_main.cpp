// The test binary's main: the same thread set-up as `hpmc` itself (short
// OpenMP waits, OpenMP over the batch, OpenBLAS on one thread), then
// GoogleTest.
#include <gtest/gtest.h>

#include "core/threads.h"

int main(int argc, char** argv) {
  hpmc::prefer_short_waits(argv);  // may re-execute the test binary
  hpmc::configure_threads();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
