//===- Registry.cpp - The list of rules -----------------------------------===//
//
// Each rule lives in its own file (rewrites/<Rule>Rule.cpp) and is listed here once, with
// its lit test test/rewrite/<name>.cpp and its page docs/rules/<name>.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"

namespace accel::rewrites {

llvm::ArrayRef<RuleInfo> allRules() {
  static const RuleInfo Rules[] = {
      {"accel-include", "#include <accelerate/accelerate.h> in a file that gets other edits",
       makeIncludeRule, /*OnlyWithOtherEdits=*/true},
      {"accel-accelerator",
       "accelerate::Accelerator accelerator; first in the function that creates the optimizer",
       makeAcceleratorRule, /*OnlyWithOtherEdits=*/true},
      {"accel-device",
       "the device comes from accelerator.device(); .to(device) on models and batches dropped",
       makeDeviceRule},
      {"accel-prepare", "accelerator.prepare(model, optimizer[, scheduler]) before training",
       makePrepareRule},
      {"accel-data-loader",
       "make_data_loader -> accelerator.prepare_data_loader for training loaders",
       makeDataLoaderRule},
      {"accel-accumulate",
       "auto accumulation = accelerator.accumulate(model); first in each training-step loop",
       makeAccumulateRule},
      {"accel-autocast", "auto autocast = accelerator.autocast(); first in each training-step loop",
       makeAutocastRule},
      {"accel-backward", "loss.backward() -> accelerator.backward(loss)", makeBackwardRule},
      {"accel-step",
       "optimizer.step(), scheduler.step(), optimizer.zero_grad() in the training loop -> "
       "accelerator.step(...), accelerator.zero_grad(...)",
       makeStepRule},
      {"accel-save", "torch::save(value, path) -> accelerator.save(value, path)", makeSaveRule},
      {"accel-reduce",
       "running statistics of the sharded training loop read through accelerator.reduce",
       makeReduceRule},
      {"accel-print",
       "std::cout -> accelerator.print(), printf -> accelerator.printf: printed once per job",
       makePrintRule},
  };
  return Rules;
}

} // namespace accel::rewrites
