#include "output_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>

namespace accel::cli {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_word_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The length of `word` (lower case) at `at`, in any case, as a whole word; 0 if it is not there.
size_t word_at(std::string_view line, size_t at, std::string_view word) {
  if (line.size() - at < word.size() || (at > 0 && is_word_char(line[at - 1]))) {
    return 0;
  }
  for (size_t i = 0; i < word.size(); ++i) {
    if (lower(line[at + i]) != word[i]) {
      return 0;
    }
  }
  const size_t end = at + word.size();
  return end < line.size() && is_word_char(line[end]) ? 0 : word.size();
}

// The number that starts at `at`, if one does: its length, and its printed resolution.
// Hand-written rather than a std::regex: libstdc++'s matcher recurses once per character and
// overflows the stack on a line of a few hundred thousand digits.
size_t number_at(std::string_view line, size_t at, double &last_digit) {
  size_t i = at;
  if (line[i] == '+' || line[i] == '-') {
    ++i;
  }
  if (i < line.size() && (line[i] == 'n' || line[i] == 'N' || line[i] == 'i' || line[i] == 'I')) {
    // A sign counts as the word's start: "x-nan" is "x" and "-nan", as "x-1" is "x" and "-1".
    for (std::string_view word : {"infinity", "inf", "nan"}) {
      if (const size_t length = word_at(line, i, word); length > 0) {
        last_digit = 0;
        return i + length - at;
      }
    }
    return 0;
  }
  const auto digits = [&line](size_t from) {
    size_t end = from;
    while (end < line.size() && is_digit(line[end])) {
      ++end;
    }
    return end - from;
  };
  const size_t whole = digits(i);
  i += whole;
  size_t decimals = 0;
  bool has_point = false;
  // A point is the number's only with a digit after it: "epoch 1." is 1 and ".".
  if (i + 1 < line.size() && line[i] == '.' && is_digit(line[i + 1])) {
    has_point = true;
    decimals = digits(i + 1);
    i += 1 + decimals;
  }
  if (whole == 0 && decimals == 0) {
    return 0;
  }
  long exponent = 0;
  bool has_exponent = false;
  if (i < line.size() && (line[i] == 'e' || line[i] == 'E')) {
    size_t from = i + 1;
    if (from < line.size() && (line[from] == '+' || line[from] == '-')) {
      ++from;
    }
    if (const size_t length = digits(from); length > 0) {
      has_exponent = true;
      exponent =
          std::strtol(std::string(line.substr(i + 1, from + length - i - 1)).c_str(), nullptr, 10);
      i = from + length;
    }
  }
  last_digit = has_point || has_exponent
                   ? std::pow(10.0, static_cast<double>(exponent) - static_cast<double>(decimals))
                   : 0.0;
  return i - at;
}

// The first difference between two lines, if any.
std::optional<LineDifference> compare_line(const std::string &original, const std::string &rewrite,
                                           const Tolerance &tolerance) {
  const auto want = line_pieces(original), got = line_pieces(rewrite);
  size_t numbers = 0;
  for (size_t k = 0; k < std::max(want.size(), got.size()); ++k) {
    LineDifference difference;
    difference.original_column = k < want.size() ? want[k].column : original.size();
    difference.rewrite_column = k < got.size() ? got[k].column : rewrite.size();
    difference.original_piece = k < want.size() ? want[k].text : "";
    difference.rewrite_piece = k < got.size() ? got[k].text : "";
    if (k < want.size() && k < got.size() && want[k].is_number && got[k].is_number) {
      ++numbers;
      if (numbers_agree(want[k], got[k], tolerance)) {
        continue;
      }
      difference.kind = LineDifference::Kind::Number;
      difference.number_ordinal = numbers;
      difference.difference = std::abs(want[k].value - got[k].value);
      difference.allowed = allowed_difference(want[k], got[k], tolerance);
      difference.last_digit = std::max(want[k].last_digit, got[k].last_digit);
      return difference;
    }
    if (k < want.size() && k < got.size() && !want[k].is_number && !got[k].is_number &&
        want[k].text == got[k].text) {
      continue;
    }
    // Words that differ: mark where they part, not where the piece starts.
    const auto &a = difference.original_piece, &b = difference.rewrite_piece;
    const auto same = static_cast<size_t>(
        std::mismatch(a.begin(), a.begin() + static_cast<long>(std::min(a.size(), b.size())),
                      b.begin())
            .first -
        a.begin());
    difference.kind = LineDifference::Kind::Text;
    difference.original_column += same;
    difference.rewrite_column += same;
    return difference;
  }
  return std::nullopt;
}

std::vector<PrintedLine> kept_lines(std::string_view output, const std::vector<std::regex> &ignore,
                                    size_t &ignored) {
  std::vector<PrintedLine> kept;
  for (auto &line : printed_lines(output)) {
    const bool drop = std::any_of(ignore.begin(), ignore.end(), [&line](const std::regex &pattern) {
      return std::regex_search(line.text, pattern);
    });
    if (drop) {
      ++ignored;
    } else {
      kept.push_back(std::move(line));
    }
  }
  return kept;
}

} // namespace

std::vector<PrintedLine> printed_lines(std::string_view output) {
  std::vector<PrintedLine> lines;
  size_t number = 0;
  for (size_t start = 0; start < output.size();) {
    const size_t newline = std::min(output.find('\n', start), output.size());
    std::string_view line = output.substr(start, newline - start);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (const size_t redrawn = line.rfind('\r'); redrawn != std::string_view::npos) {
      line.remove_prefix(redrawn + 1);
    }
    lines.push_back({++number, std::string(line)});
    start = newline + 1;
  }
  return lines;
}

std::vector<LinePiece> line_pieces(std::string_view line) {
  std::vector<LinePiece> pieces;
  size_t text_start = 0;
  for (size_t at = 0; at < line.size();) {
    double last_digit = 0;
    const size_t length = number_at(line, at, last_digit);
    if (length == 0) {
      ++at;
      continue;
    }
    if (at > text_start) {
      pieces.push_back({false, std::string(line.substr(text_start, at - text_start)), text_start});
    }
    LinePiece number{true, std::string(line.substr(at, length)), at};
    number.value = std::strtod(number.text.c_str(), nullptr);
    number.last_digit = last_digit;
    pieces.push_back(std::move(number));
    at += length;
    text_start = at;
  }
  if (text_start < line.size()) {
    pieces.push_back({false, std::string(line.substr(text_start)), text_start});
  }
  return pieces;
}

double allowed_difference(const LinePiece &original, const LinePiece &rewrite,
                          const Tolerance &tolerance) {
  return tolerance.atol + tolerance.rtol * std::abs(original.value) +
         std::max(original.last_digit, rewrite.last_digit);
}

bool numbers_agree(const LinePiece &original, const LinePiece &rewrite,
                   const Tolerance &tolerance) {
  const double a = original.value, b = rewrite.value;
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b); // the same failure on both sides
  }
  if (std::isinf(a) || std::isinf(b)) {
    return a == b;
  }
  return std::abs(a - b) <= allowed_difference(original, rewrite, tolerance);
}

std::vector<std::regex> ignore_patterns(const std::vector<std::string> &patterns) {
  std::vector<std::regex> compiled;
  for (const auto &pattern : patterns) {
    try {
      compiled.emplace_back(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error &error) {
      throw std::runtime_error("--ignore: '" + pattern +
                               "' is not a regular expression (ECMAScript): " + error.what());
    }
  }
  return compiled;
}

OutputComparison compare_outputs(std::string_view original, std::string_view rewrite,
                                 const std::vector<std::regex> &ignore,
                                 const Tolerance &tolerance) {
  OutputComparison result;
  result.original = kept_lines(original, ignore, result.ignored_original);
  result.rewrite = kept_lines(rewrite, ignore, result.ignored_rewrite);
  const size_t paired = std::min(result.original.size(), result.rewrite.size());
  for (size_t index = 0; index < paired; ++index) {
    if (auto difference =
            compare_line(result.original[index].text, result.rewrite[index].text, tolerance)) {
      difference->index = index;
      result.differences.push_back(std::move(*difference));
    }
  }
  if (result.original.size() != result.rewrite.size()) {
    // One entry stands for every line the shorter output lacks: they all differ.
    LineDifference missing;
    missing.kind = result.rewrite.size() < result.original.size()
                       ? LineDifference::Kind::MissingInRewrite
                       : LineDifference::Kind::MissingInOriginal;
    missing.index = paired;
    result.differences.push_back(std::move(missing));
  }
  return result;
}

} // namespace accel::cli
