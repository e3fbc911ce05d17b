#include "comparison_report.h"

#include <algorithm>
#include <cstdio>

namespace accel::cli {
namespace {

using Kind = LineDifference::Kind;

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

std::string lines_text(size_t count) {
  return std::to_string(count) + (count == 1 ? " line" : " lines");
}

// One terminal column of a program's line: its glyph (a UTF-8 character, a space of an
// expanded tab, "^" or a letter of a control character written as ^X) and the byte of the
// line it shows.
struct Cell {
  std::string glyph;
  size_t source = 0;
};

std::vector<Cell> cells_of(std::string_view text) {
  std::vector<Cell> cells;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte & 0xC0) == 0x80 && !cells.empty()) {
      cells.back().glyph += text[i]; // a UTF-8 continuation byte: the same column
    } else if (byte == '\t') {
      do {
        cells.push_back({" ", i});
      } while (cells.size() % 8 != 0);
    } else if (byte < 0x20 || byte == 0x7F) {
      // Escape sequences and other control bytes would move the cursor or recolour the view.
      cells.push_back({"^", i});
      cells.push_back({std::string(1, static_cast<char>(byte ^ 0x40)), i});
    } else {
      cells.push_back({std::string(1, text[i]), i});
    }
  }
  return cells;
}

// `text` in exactly `width` columns: cut with "..." where it is too long, padded with spaces.
// With a `focus` (a byte offset), the window keeps that byte in view.
std::string fit(std::string_view text, size_t width, size_t focus = std::string_view::npos) {
  constexpr std::string_view kCut = "...";
  const auto cells = cells_of(text);
  size_t first = 0;
  if (cells.size() > width && focus != std::string_view::npos) {
    const auto at = static_cast<size_t>(
        std::find_if(cells.begin(), cells.end(),
                     [focus](const Cell &cell) { return cell.source >= focus; }) -
        cells.begin());
    // Out of view (or at the edge): show it a third of the way in, after a cut mark, with the
    // start of the line gone; never past where the rest of the line would fill the width.
    if (at + kCut.size() + 8 > width) {
      first = std::min(at - std::min(at, width / 3), cells.size() + kCut.size() - width);
    }
  }
  std::string out;
  size_t used = 0;
  if (first > 0) {
    out += kCut;
    used = kCut.size();
  }
  for (size_t i = first; i < cells.size(); ++i) {
    if (cells.size() - i > width - used && used + kCut.size() >= width) {
      out += kCut;
      used += kCut.size();
      break;
    }
    out += cells[i].glyph;
    ++used;
  }
  out.append(width - std::min(width, used), ' ');
  return out;
}

size_t digits(size_t number) { return std::to_string(number).size(); }

std::string quoted(const std::string &piece) {
  constexpr size_t kShown = 40;
  const auto cells = cells_of(piece);
  std::string shown;
  for (size_t i = 0; i < std::min(cells.size(), kShown); ++i) {
    shown += cells[i].glyph;
  }
  return "'" + shown + (cells.size() > kShown ? "...'" : "'");
}

// What differs at the marked line, in sentences of at most `width` columns.
std::string explanation(const OutputComparison &comparison, const LineDifference &first,
                        const Tolerance &tolerance) {
  if (first.kind == Kind::MissingInRewrite || first.kind == Kind::MissingInOriginal) {
    const bool rewrite_short = first.kind == Kind::MissingInRewrite;
    const auto &longer = rewrite_short ? comparison.original : comparison.rewrite;
    return std::string("The ") + (rewrite_short ? "rewrite" : "original") + "'s output ends " +
           "here; the " + (rewrite_short ? "original" : "rewrite") + " printed " +
           lines_text(longer.size() - first.index) + " more, from its line " +
           std::to_string(longer[first.index].number) + ".\n";
  }
  const size_t original_number = comparison.original[first.index].number;
  const size_t rewrite_number = comparison.rewrite[first.index].number;
  const std::string where =
      "Line " + std::to_string(original_number) +
      (original_number == rewrite_number
           ? std::string()
           : " of the original, " + std::to_string(rewrite_number) + " of the rewrite");
  if (first.kind == Kind::Number) {
    std::string text = where + ", number " + std::to_string(first.number_ordinal) +
                       " on the line: the original printed " + first.original_piece +
                       ", the rewrite " + first.rewrite_piece + ".\n  They differ by " +
                       number_text(first.difference) + "; allowed: " + number_text(first.allowed) +
                       " = atol " + number_text(tolerance.atol) + " + rtol " +
                       number_text(tolerance.rtol) + " x " + first.original_piece;
    if (first.last_digit > 0) {
      text += "\n  + " + number_text(first.last_digit) + " (one unit of the last digit printed)";
    }
    return text + ".\n";
  }
  const auto piece = [](const std::string &text) {
    return text.empty() ? std::string("(the line ends here)") : quoted(text);
  };
  return where + ", the text differs:\n  original: " + piece(first.original_piece) +
         "\n  rewrite:  " + piece(first.rewrite_piece) + "\n";
}

} // namespace

std::string agreement_summary(const OutputComparison &comparison, const Tolerance &tolerance,
                              const std::string &runs) {
  const size_t count = comparison.original.size();
  std::string text = "accel verify: " + lines_text(count) + (count == 1 ? " agrees" : " agree") +
                     " (rtol " + number_text(tolerance.rtol) + ", atol " +
                     number_text(tolerance.atol) + "), " + runs;
  if (comparison.ignored_original + comparison.ignored_rewrite > 0) {
    text += "; --ignore dropped " + lines_text(comparison.ignored_original) + " of the original, " +
            std::to_string(comparison.ignored_rewrite) + " of the rewrite";
  }
  return text + "\n";
}

std::string difference_report(const OutputComparison &comparison, const Tolerance &tolerance,
                              const ReportLayout &layout) {
  const auto &first = comparison.differences.front();
  const auto &original = comparison.original;
  const auto &rewrite = comparison.rewrite;

  const size_t longer = std::max(original.size(), rewrite.size());
  const size_t paired = std::min(original.size(), rewrite.size());
  // Every line past the shorter output differs too.
  const size_t differing =
      comparison.differences.size() - (original.size() != rewrite.size()) + (longer - paired);
  std::string text = "accel verify: the outputs differ in " + std::to_string(differing) + " of " +
                     lines_text(longer) + "; the first difference is marked.\n";
  if (original.size() != rewrite.size()) {
    text +=
        "The original printed " + lines_text(original.size()) + ", the rewrite " +
        std::to_string(rewrite.size()) +
        (comparison.ignored_original + comparison.ignored_rewrite > 0 ? " (after --ignore)" : "") +
        ".\n";
  }

  // Two columns and " | " between them; narrower than 40 there is no room for the view.
  const size_t half = (std::max<size_t>(layout.width, 40) - 3) / 2;
  const size_t begin = first.index - std::min(first.index, layout.context);
  const size_t end = std::min(longer, first.index + layout.context + 1);
  size_t number_width = 1;
  for (size_t i = begin; i < end; ++i) {
    number_width = std::max({number_width, i < original.size() ? digits(original[i].number) : 0,
                             i < rewrite.size() ? digits(rewrite[i].number) : 0});
  }
  const size_t text_width = half - 2 - number_width - 1;
  const auto column = [&](const std::vector<PrintedLine> &lines, size_t i, size_t focus,
                          bool marked) {
    std::string cell = marked ? "> " : "  ";
    if (i < lines.size()) {
      const auto number = std::to_string(lines[i].number);
      cell += std::string(number_width - number.size(), ' ') + number + " " +
              fit(lines[i].text, text_width, focus);
    } else if (i == lines.size()) {
      cell += std::string(number_width + 1, ' ') + fit("(its output ends here)", text_width);
    } else {
      cell += std::string(half - 2, ' ');
    }
    return cell;
  };
  const auto add_row = [&text](std::string row) {
    row.erase(row.find_last_not_of(' ') + 1);
    text += row + "\n";
  };
  add_row(fit(layout.original_title, half) + " | " + fit(layout.rewrite_title, half));
  for (size_t i = begin; i < end; ++i) {
    const bool marked = i == first.index;
    add_row(column(original, i, marked ? first.original_column : std::string_view::npos, marked) +
            " | " +
            column(rewrite, i, marked ? first.rewrite_column : std::string_view::npos, marked));
  }
  const bool both_lines = first.kind == Kind::Text || first.kind == Kind::Number;
  if (both_lines && (cells_of(original[first.index].text).size() > text_width ||
                     cells_of(rewrite[first.index].text).size() > text_width)) {
    // The columns cut the marked lines: here they are one above the other, as wide as fits.
    const size_t width = 2 * half + 3 - 12;
    add_row("  original: " + fit(original[first.index].text, width, first.original_column));
    add_row("  rewrite:  " + fit(rewrite[first.index].text, width, first.rewrite_column));
  }
  return text + explanation(comparison, first, tolerance);
}

} // namespace accel::cli
