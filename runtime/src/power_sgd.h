// Options::comm_hook = "powersgd": low-rank gradient compression with error feedback, as DDP's
// powerSGD_hook (Vogels, Karimireddy and Jaggi, "PowerSGD", NeurIPS 2019). One PowerSgdBucket
// per gradient bucket. Each gradient matrix M (rows × cols, a parameter of 2 or more dimensions
// seen as shape[0] × the rest) travels as two thin factors instead of itself:
//
//   P = M Q (rows × r), summed;  P orthonormalised;  Q = Mᵀ P (cols × r), summed;  M ≈ P Qᵀ.
//
// Vectors, small matrices and the bucket's "has a gradient" flags are summed uncompressed. What
// the approximation misses is kept per process and added to the next step's gradient (error
// feedback), and Q starts each step from the last one (warm start: one step of power iteration
// per training step). The first `start_iteration` steps are summed uncompressed, as DDP does.
#pragma once

#include "comm_hook.h"
#include "process_group.h"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accelerate::detail {

/// A matrix of the bucket: where its elements lie in the bucket's flat tensor and its shape.
struct BucketMatrix {
  int64_t offset;
  int64_t rows;
  int64_t cols;
};

class PowerSgdBucket {
public:
  /// `candidates`: every parameter of the bucket of 2 or more dimensions; those that would not
  /// shrink by `min_compression_rate` are summed uncompressed with the rest of `flat`.
  PowerSgdBucket(const PowerSgdSettings &settings, const std::vector<BucketMatrix> &candidates,
                 const torch::Tensor &flat);

  /// Starts the sums that need nothing from the other processes: the uncompressed part and P.
  /// `flat` holds this process's share of the average (its gradients divided by the world size).
  void launch(ProcessGroup &group, const torch::Tensor &flat, const std::string &what);
  /// Waits for them, sums Q and writes the approximation of the average into `flat`.
  void finish(ProcessGroup &group, const torch::Tensor &flat, const std::string &what);

  /// Whether the last finish() compressed (false while start_iteration is not reached, or when
  /// no matrix of the bucket is worth compressing).
  bool compressed_last_step() const { return compressed_last_step_; }

private:
  struct Matrix {
    BucketMatrix place;
    int64_t r;
    torch::Tensor error; ///< what the approximations missed so far, in this process's share
    torch::Tensor p;     ///< view of p_all_
    torch::Tensor q;     ///< view of q_all_: the warm start, then the sum of Mᵀ P
  };
  bool compressing() const;
  torch::Tensor matrix_in(const torch::Tensor &flat, const Matrix &matrix) const;
  void randomise_q(Matrix &matrix);
  void copy_rest(const torch::Tensor &flat, bool into_flat);

  PowerSgdSettings settings_;
  std::vector<Matrix> matrices_;
  /// The parts of the flat tensor summed as they are: (offset, numel).
  std::vector<std::pair<int64_t, int64_t>> rest_ranges_;
  torch::Tensor rest_, p_all_, q_all_;
  at::Generator generator_;
  int64_t steps_ = 0;
  bool compressed_last_step_ = false;
  c10::intrusive_ptr<c10d::Work> rest_work_, p_work_;
};

} // namespace accelerate::detail
