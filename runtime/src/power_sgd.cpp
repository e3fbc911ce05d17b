#include "power_sgd.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace accelerate::detail {
namespace {

// Gram-Schmidt on P's few columns, in place. A zero column stays zero (DDP's epsilon of 0 would
// divide by it): its matrix then contributes nothing this step instead of NaN.
void orthonormalise_columns(const torch::Tensor &p) {
  for (int64_t j = 0; j < p.size(1); ++j) {
    auto column = p.select(1, j);
    for (int64_t k = 0; k < j; ++k) {
      const auto earlier = p.select(1, k);
      column.sub_(earlier * torch::dot(earlier, column));
    }
    column.div_(column.norm().clamp_min(std::numeric_limits<float>::min()));
  }
}

} // namespace

PowerSgdBucket::PowerSgdBucket(const PowerSgdSettings &settings,
                               const std::vector<BucketMatrix> &candidates,
                               const torch::Tensor &flat)
    : settings_(settings), generator_(at::detail::createCPUGenerator(settings.seed)) {
  if (settings.rank < 1 || settings.start_iteration < 0) {
    throw std::invalid_argument("accelerate: PowerSGD needs a rank of at least 1 and a start "
                                "iteration of 0 or more");
  }
  for (const auto &candidate : candidates) {
    const int64_t r = std::min<int64_t>({settings.rank, candidate.rows, candidate.cols});
    // DDP's test: the two factors must take less than 1 / min_compression_rate of the matrix.
    const double factors = static_cast<double>((candidate.rows + candidate.cols) * r);
    if (factors * settings.min_compression_rate <
        static_cast<double>(candidate.rows) * static_cast<double>(candidate.cols)) {
      matrices_.push_back(Matrix{candidate, r, {}, {}, {}});
    }
  }
  std::sort(matrices_.begin(), matrices_.end(),
            [](const Matrix &a, const Matrix &b) { return a.place.offset < b.place.offset; });
  int64_t position = 0, p_elements = 0, q_elements = 0;
  for (const auto &matrix : matrices_) {
    if (matrix.place.offset > position) {
      rest_ranges_.emplace_back(position, matrix.place.offset - position);
    }
    position = matrix.place.offset + matrix.place.rows * matrix.place.cols;
    p_elements += matrix.place.rows * matrix.r;
    q_elements += matrix.place.cols * matrix.r;
  }
  if (position < flat.numel()) {
    rest_ranges_.emplace_back(position, flat.numel() - position);
  }
  if (matrices_.empty()) {
    return; // nothing worth compressing: the bucket is summed as it is
  }
  const auto options = flat.options();
  int64_t rest_elements = 0;
  for (const auto &[offset, numel] : rest_ranges_) {
    rest_elements += numel;
  }
  rest_ = torch::empty({rest_elements}, options);
  p_all_ = torch::empty({p_elements}, options);
  q_all_ = torch::empty({q_elements}, options);
  int64_t p_at = 0, q_at = 0;
  for (auto &matrix : matrices_) {
    const auto rows = matrix.place.rows, cols = matrix.place.cols;
    matrix.p = p_all_.narrow(0, p_at, rows * matrix.r).view({rows, matrix.r});
    matrix.q = q_all_.narrow(0, q_at, cols * matrix.r).view({cols, matrix.r});
    p_at += rows * matrix.r;
    q_at += cols * matrix.r;
    if (settings_.error_feedback) {
      matrix.error = torch::zeros({rows, cols}, options);
    }
    randomise_q(matrix);
  }
}

bool PowerSgdBucket::compressing() const {
  return !matrices_.empty() && steps_ >= settings_.start_iteration;
}

torch::Tensor PowerSgdBucket::matrix_in(const torch::Tensor &flat, const Matrix &matrix) const {
  const auto rows = matrix.place.rows, cols = matrix.place.cols;
  return flat.narrow(0, matrix.place.offset, rows * cols).view({rows, cols});
}

void PowerSgdBucket::randomise_q(Matrix &matrix) {
  // Drawn on the CPU from the bucket's own generator, which every process seeds and advances
  // alike: all start from the same Q whatever their device or global seed.
  const auto values = torch::randn({matrix.place.cols, matrix.r}, generator_,
                                   torch::TensorOptions().dtype(matrix.q.scalar_type()));
  orthonormalise_columns(values);
  matrix.q.copy_(values);
}

void PowerSgdBucket::copy_rest(const torch::Tensor &flat, bool into_flat) {
  int64_t at = 0;
  for (const auto &[offset, numel] : rest_ranges_) {
    auto part = flat.narrow(0, offset, numel);
    auto packed = rest_.narrow(0, at, numel);
    if (into_flat) {
      part.copy_(packed);
    } else {
      packed.copy_(part);
    }
    at += numel;
  }
}

void PowerSgdBucket::launch(ProcessGroup &group, const torch::Tensor &flat,
                            const std::string &what) {
  torch::NoGradGuard no_grad;
  if (!compressing()) {
    rest_work_ = group.start_sum(flat, what);
    return;
  }
  copy_rest(flat, /*into_flat=*/false);
  rest_work_ = group.start_sum(rest_, what + " (its uncompressed part)");
  for (auto &matrix : matrices_) {
    auto m = matrix_in(flat, matrix);
    if (settings_.error_feedback) {
      m.add_(matrix.error); // this process's share, plus what earlier steps missed of it
    }
    if (!settings_.warm_start) {
      randomise_q(matrix);
    }
    at::mm_out(matrix.p, m, matrix.q);
  }
  p_work_ = group.start_sum(p_all_, what + " (PowerSGD's P)");
}

void PowerSgdBucket::finish(ProcessGroup &group, const torch::Tensor &flat,
                            const std::string &what) {
  torch::NoGradGuard no_grad;
  compressed_last_step_ = compressing();
  ++steps_;
  if (!compressed_last_step_) {
    if (rest_work_) {
      group.wait(rest_work_, what);
    }
    rest_work_.reset();
    return;
  }
  if (p_work_) {
    group.wait(p_work_, what + " (PowerSGD's P)");
  }
  p_work_.reset();
  // P is the same on every process after its sum, so all take the same branch (and run the
  // same collectives). A non-finite P (an overflow under fp16 loss scaling, say) reaches .grad
  // as NaN for the loss scaler to see; the error and Q keep their values from before it.
  if (torch::isfinite(p_all_).all().item<bool>()) {
    for (auto &matrix : matrices_) {
      orthonormalise_columns(matrix.p);
      at::mm_out(matrix.q, matrix_in(flat, matrix).t(), matrix.p);
    }
    group.sum(q_all_, what + " (PowerSGD's Q)");
    const double world = group.size();
    for (auto &matrix : matrices_) {
      auto m = matrix_in(flat, matrix);
      const auto approximation_t = matrix.q.t();
      if (settings_.error_feedback) {
        // This process's share of what was missed: its input less its share of the average's
        // approximation P Qᵀ. Over the processes these add up to all that was missed. At rank 1
        // addr does it in one pass; addmm into another tensor copies the input there first.
        if (matrix.r == 1) {
          at::addr_out(matrix.error, m, matrix.p.view({-1}), matrix.q.view({-1}), 1.0,
                       -1.0 / world);
        } else {
          at::addmm_out(matrix.error, m, matrix.p, approximation_t, 1.0, -1.0 / world);
        }
      }
      at::mm_out(m, matrix.p, approximation_t); // the approximated average becomes .grad
    }
    if (settings_.warm_start) {
      // A Q that summed to zero (no process had a gradient for the matrix) would hold P at
      // zero for good; it starts again from random values.
      for (auto &matrix : matrices_) {
        if (!matrix.q.any().item<bool>()) {
          randomise_q(matrix);
        }
      }
    }
  } else {
    for (auto &matrix : matrices_) {
      matrix_in(flat, matrix).fill_(std::numeric_limits<double>::quiet_NaN());
    }
  }
  if (rest_work_) {
    group.wait(rest_work_, what + " (its uncompressed part)");
  }
  rest_work_.reset();
  copy_rest(flat, /*into_flat=*/true);
}

} // namespace accelerate::detail
