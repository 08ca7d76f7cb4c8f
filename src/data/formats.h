// formats.h — what dataset.cpp dispatches to: the probe and the loader of
// each format beyond its own MNIST and CIFAR-10 directory handling. Internal
// to src/data; everything else goes through dataset.h (and image_folder.h
// for image files named on the command line).
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace hpmc {

// mnist.cpp: the dimensions an IDX images file's header declares, checked
// as load_mnist checks them (DataError naming the file).
struct IdxShape {
  uint32_t n = 0, rows = 0, cols = 0;
};
IdxShape read_mnist_images_header(const std::string& path);

// image_folder.cpp: format images.
DataProbe probe_image_folder(const std::string& dir, const DataOptions& o, Splits which);
DataSplits load_image_folder(const std::string& dir, const DataOptions& o, Splits which,
                             const LoadProgress& progress);

// npy_data.cpp: format npy.
DataProbe probe_npy_dir(const std::string& dir, const DataOptions& o, Splits which);
DataSplits load_npy_dir(const std::string& dir, const DataOptions& o, Splits which);

}  // namespace hpmc
