// download_hints.h — where each dataset can be had, quoted by the loaders'
// error messages so that a missing or broken file comes with the way to fix
// it. Internal to src/data.
#pragma once

namespace hpmc::data_hints {

inline constexpr const char* kMnistGetIt =
    "get MNIST from http://yann.lecun.com/exdb/mnist/ or Fashion-MNIST from "
    "https://github.com/zalandoresearch/fashion-mnist (or install the Debian package "
    "dataset-fashion-mnist, which puts it in /usr/share/datasets/fashion-mnist)";

inline constexpr const char* kCifarGetIt =
    "get cifar-10-binary.tar.gz (the binary version) from "
    "https://www.cs.toronto.edu/~kriz/cifar.html "
    "and extract it with `tar xzf cifar-10-binary.tar.gz`";

}  // namespace hpmc::data_hints
