// image_folder.h — datasets of image files: the images data format
// (data.format: images) and image files named on the command line
// (hpmc recon --images).
//
// An images directory (data.path) is one of
//   flat          image files only: no labels (num_classes 0, labels -1);
//   class folders one sub-directory per class, holding that class's images
//                 (sub-directories of a class folder are walked too); the
//                 labels are the class folders' indices in sorted name order,
//                 as torchvision's ImageFolder gives them;
//   train/ [test/] a directory holding only these, each flat or class folders
//                 alike (with the same class folders): the two splits.
// Without test/, data.test_fraction holds a seeded share of the samples out
// as the test split (dataset.h split_by_fraction); without either there is no
// test split (hpmc run then reports no test loss). Files and folders whose
// names start with '.' are skipped. Every other file must be a .png, .jpg,
// .jpeg or .bmp (any case), and each is decoded strictly (io/image_decode.h):
// another file, a damaged one, an empty class folder or no images at all is
// a DataError naming it. Files are taken in sorted path order.
//
// What the model gets: data.channels (1 or 3) and data.size [H, W] convert
// and resize every image (io/image_decode.h to_chw); without them, the first
// image (in that order, the training split's first) sets the channels (1 for
// grey, 3 for colour) and the size, and an image that differs is an error
// naming it, its shape and the first image's. Images decode on every thread.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace hpmc {

// The shape images are brought to, and which differences are converted.
struct ImageTarget {
  int channels = 0, height = 0, width = 0;  // 0: the first image's
  bool convert_channels = false;  // another channel count is converted (else an error)
  bool resize = false;            // another size is resized (else an error)
  // For the message when an image differs and is not converted: what it
  // is compared with ("" : "the first image, PATH,") and what to do
  // ("": set data.channels or data.size to convert).
  std::string origin, hint;
};

// The image files that `paths` name, in order: a file as it is, a directory
// as its image files (sub-directories walked, sorted, hidden names skipped;
// another file is an error). DataError for a path that is not there, a
// directory without images, or a file without an image extension.
std::vector<std::string> list_image_files(const std::vector<std::string>& paths);

// The images at `files` (list_image_files) as one unlabelled dataset of the
// target's shape (its zeros filled from the first image), decoded on every
// thread; files[i] is sample i. `progress` hears about the decoding.
Dataset load_image_files(const std::vector<std::string>& files, const ImageTarget& target,
                         const LoadProgress& progress = {});

}  // namespace hpmc
