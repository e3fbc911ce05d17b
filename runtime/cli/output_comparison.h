// What two programs printed, compared line by line the way `accel verify` judges a rewrite
// against its original (docs/launcher.md, "accel verify"): the words exactly, the numbers
// within a tolerance, the same number of lines.
#pragma once

#include <cstddef>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace accel::cli {

/// One line of a program's output, numbered as printed (from 1, counting ignored lines).
struct PrintedLine {
  size_t number = 0;
  std::string text;
};

/// The lines of `output`: split at '\n', a '\r' before it dropped; a line redrawn with '\r'
/// (a progress bar) counts as what it showed last; text after the last '\n' is a line too.
std::vector<PrintedLine> printed_lines(std::string_view output);

/// A piece of a line: a number as printed ("-1.5e-03", "42", "nan"), or the text between two.
struct LinePiece {
  bool is_number = false;
  std::string text;
  size_t column = 0; ///< byte offset in the line
  double value = 0;  ///< numbers only
  /// A number's printed resolution, one unit in its last decimal place (0.01 for "0.25",
  /// 1e-05 for "1.5e-04"); 0 for a whole number, which is exact as printed.
  double last_digit = 0;
};

/// "[64/256] loss 0.12" is "[", 64, "/", 256, "] loss ", 0.12. A sign belongs to the number it
/// precedes; nan and inf (any case, signed, as whole words) are numbers.
std::vector<LinePiece> line_pieces(std::string_view line);

struct Tolerance {
  double rtol = 1e-3; ///< relative to the original's value
  double atol = 1e-6; ///< for values near zero
};

/// How far the rewrite's number may be from the original's: atol + rtol·|original| + the
/// coarser of the two printed resolutions (two values that agree can print one last digit
/// apart once rounded; a whole number gets no such allowance).
double allowed_difference(const LinePiece &original, const LinePiece &rewrite,
                          const Tolerance &tolerance);

/// Whether two numbers agree: within allowed_difference, or both nan, or the same infinity.
bool numbers_agree(const LinePiece &original, const LinePiece &rewrite, const Tolerance &tolerance);

/// Where two compared lines part, or where one output has no line left.
struct LineDifference {
  enum class Kind {
    Text,              ///< the words differ, or a number stands where the other has words
    Number,            ///< two numbers beyond the tolerance
    MissingInRewrite,  ///< the rewrite printed fewer lines
    MissingInOriginal, ///< the rewrite printed more lines
  };
  Kind kind = Kind::Text;
  size_t index = 0; ///< position among the compared lines of both outputs
  /// Text and Number: the pieces that differ ("" where a line ended first), their byte
  /// offsets in their lines, and for numbers which one of the line it is (from 1).
  std::string original_piece, rewrite_piece;
  size_t original_column = 0, rewrite_column = 0;
  size_t number_ordinal = 0;
  /// Number only: how far apart, how far they may be, and the part of that allowance owed to
  /// the printed digits (LinePiece::last_digit).
  double difference = 0, allowed = 0, last_digit = 0;
};

/// Two outputs compared: the lines kept after --ignore, and every line that differs.
struct OutputComparison {
  std::vector<PrintedLine> original, rewrite;
  size_t ignored_original = 0, ignored_rewrite = 0;
  std::vector<LineDifference> differences; ///< in line order; empty when the outputs agree

  bool agree() const { return differences.empty(); }
};

/// Compiles --ignore patterns (ECMAScript); throws std::runtime_error naming the bad one.
std::vector<std::regex> ignore_patterns(const std::vector<std::string> &patterns);

/// Compares the original's output with the rewrite's. A line in which any of `ignore` matches
/// (anywhere) is dropped from its side first; the rest must pair up one to one.
OutputComparison compare_outputs(std::string_view original, std::string_view rewrite,
                                 const std::vector<std::regex> &ignore, const Tolerance &tolerance);

} // namespace accel::cli
