// How `accel verify` shows a comparison in a terminal: one line when the outputs agree; when
// they differ, the two side by side around the first difference, marked, and what differs.
#pragma once

#include "output_comparison.h"

#include <cstddef>
#include <string>

namespace accel::cli {

struct ReportLayout {
  std::string original_title = "original"; ///< above the left column ("original, 1 process")
  std::string rewrite_title = "rewrite";   ///< above the right column
  size_t width = 100;                      ///< columns of the terminal
  size_t context = 2;                      ///< lines shown before and after the first difference
};

/// "accel verify: 42 lines agree (rtol 0.001, atol 1e-06), <runs>", and what --ignore dropped.
std::string agreement_summary(const OutputComparison &comparison, const Tolerance &tolerance,
                              const std::string &runs);

/// The headline, the side-by-side view with the first difference marked ('>'), and the
/// sentences that say what differs there (the numbers, the tolerance). Lines longer than their
/// column are cut, around the difference on the marked line. Never wider than layout.width.
std::string difference_report(const OutputComparison &comparison, const Tolerance &tolerance,
                              const ReportLayout &layout);

} // namespace accel::cli
