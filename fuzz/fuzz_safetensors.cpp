// fuzz_safetensors.cpp — the safetensors reader (io/safetensors.h) and the
// checkpoint loader on top of it (model/checkpoint.h) on an arbitrary file.
//
// The file is read as safetensors and every tensor copied out; then loaded
// into a fixed model twice: for its weights (--init, eval) and to resume
// (weights, the optimizer's momentum and the training position). A position that loads is
// one the trainer can continue from: epoch 0..epochs, step within an epoch,
// global_step = epoch · steps + step, finite sums.
#include <cmath>

#include "fuzz_checkpoint_model.h"
#include "fuzz_common.h"
#include "io/safetensors.h"
#include "model/checkpoint.h"
#include "optim/optimizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  static std::unique_ptr<Model> model = fuzz::checkpoint_model();
  const Config& cfg = fuzz::checkpoint_config();
  static std::unique_ptr<Optimizer> opt = make_optimizer(cfg.training.optimizer, model->params());
  const std::string path = fuzz::write_scratch("ckpt.safetensors", data, size);

  if (!fuzz::expect_clean([&] {
        SafetensorsFile f = SafetensorsFile::read(path);
        for (const SafetensorsTensor& t : f.tensors()) {
          if (f.find(t.name) != &t) fuzz::finding("find() does not return the tensor listed");
          std::vector<unsigned char> out(t.end - t.begin);
          f.copy_to(t.name, t.dtype, t.shape, out.data());
        }
      }))
    return 0;
  fuzz::expect_clean([&] { load_checkpoint(path, *model); });
  TrainState st;
  if (!fuzz::expect_clean([&] {
        load_checkpoint(path, *model, *opt, cfg, st, fuzz::kCheckpointTrainSize);
      }))
    return 0;
  const int steps = (fuzz::kCheckpointTrainSize + cfg.training.batch_size - 1) /
                    cfg.training.batch_size;
  if (st.epoch < 0 || st.step < 0 || st.step > steps ||
      st.global_step != int64_t(st.epoch) * steps + st.step || !std::isfinite(st.loss_sum) ||
      !std::isfinite(st.correct) || opt->steps() != st.global_step)
    fuzz::finding("a resumed position the trainer cannot continue from");
  return 0;
}
