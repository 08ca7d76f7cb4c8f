// loss_list.h — every loss hpmc has, one line each: HPMC_LOSS(Name).
//
// As layer_list.h does for layers: the LossKind enum, the registry and
// gpu::register_layers() come from this list, and each loss's files define
//   HPMC_REGISTER_LOSS_SPEC(Name)  in the device-neutral spec (class NameSpec)
//   HPMC_REGISTER_LOSS_CPU(Name)   in the CPU file (class NameCPU)
//   HPMC_REGISTER_LOSS_GPU(Name)   in the GPU file (class gpu::NameGPU)
//
// No include guard: the file is included once per expansion of HPMC_LOSS.
HPMC_LOSS(MseLoss)
HPMC_LOSS(SoftmaxCrossEntropy)
HPMC_LOSS(BceWithLogitsLoss)
HPMC_LOSS(BceLoss)
HPMC_LOSS(L1Loss)
