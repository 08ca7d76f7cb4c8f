// layer_list.h — every layer type hpmc has, one line each: HPMC_LAYER(Name).
//
// This list is the one registration site. From it schema.h makes the
// LayerKind enum (LayerKind::kName), registry.cpp registers NameSpec's
// schema with the CPU creator, and gpu::register_layers() attaches the GPU
// creator (layers/gpu/register.cu; a build without CUDA attaches none). For
// each Name the three files of the layer define, with one macro line each
// (schema.h):
//   HPMC_REGISTER_SPEC(Name)  in the device-neutral spec (class NameSpec)
//   HPMC_REGISTER_CPU(Name)   in the CPU file (class NameCPU)
//   HPMC_REGISTER_GPU(Name)   in the GPU file (class gpu::NameGPU)
// so a listed layer that lacks one of them fails to link. The order here is
// the order of `hpmc info` and the README's reference. docs/adding-a-layer.md
// walks through adding one.
//
// No include guard: the file is included once per expansion of HPMC_LAYER.
HPMC_LAYER(Conv2d)
HPMC_LAYER(Linear)
HPMC_LAYER(MaxPool2d)
HPMC_LAYER(AvgPool2d)
HPMC_LAYER(UpSample2d)
HPMC_LAYER(ConvTranspose2d)
HPMC_LAYER(Flatten)
HPMC_LAYER(ReLU)
HPMC_LAYER(LeakyReLU)
HPMC_LAYER(PReLU)
HPMC_LAYER(Sigmoid)
HPMC_LAYER(Tanh)
HPMC_LAYER(BatchNorm2d)
HPMC_LAYER(Dropout)
