// npy_data.h — the npy data format (data.format: npy): NumPy arrays in a
// directory (data.path).
//
//   images.npy       the training images (or every image, with
//                    data.test_fraction): uint8 (|u1, raw pixel values
//                    0..255) or float32 (<f4, values in [0, 1], kept as
//                    they are, so the model sees exactly them); shaped
//                    N×H×W (data.layout: nhw, or auto), N×H×W×C (nhwc) or
//                    N×C×H×W (nchw), C 1 or 3, C order (not Fortran)
//   labels.npy       optional: one integer label per image (any of numpy's
//                    little-endian integer dtypes, shape (N,) or (N, 1)),
//                    each in 0 .. 2^31 − 2
//   test_images.npy, test_labels.npy
//                    the test split, alike (labels with both splits or with
//                    neither), or data.test_fraction instead
//
// The class count is the largest label of the label files there are, plus
// one (both splits count, so every command of one config builds the same
// model); without labels the data is unlabelled (num_classes 0). A float32
// value outside [0, 1] (or NaN) is an error naming the file, the image and
// the value: scale 0..255 data by 1/255, or save it as uint8. Everything that
// can be checked from the headers is checked before any pixel is read.
#pragma once

#include "data/dataset.h"

namespace hpmc {

// The file names inside data.path.
constexpr const char* kNpyImages = "images.npy";
constexpr const char* kNpyLabels = "labels.npy";
constexpr const char* kNpyTestImages = "test_images.npy";
constexpr const char* kNpyTestLabels = "test_labels.npy";

}  // namespace hpmc
