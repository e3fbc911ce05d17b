// How accel verify shows a comparison (runtime/cli/comparison_report.h), on strings.
#include "comparison_report.h"

#include <gtest/gtest.h>

#include <sstream>

namespace {

using accel::cli::agreement_summary;
using accel::cli::compare_outputs;
using accel::cli::difference_report;
using accel::cli::ignore_patterns;
using accel::cli::ReportLayout;
using accel::cli::Tolerance;

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

// Columns as a terminal counts them: UTF-8 continuation bytes take none.
size_t columns(const std::string &line) {
  size_t count = 0;
  for (const char c : line) {
    count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }
  return count;
}

std::string numbered(int count, const std::string &changed_line, int changed_at) {
  std::string text;
  for (int i = 1; i <= count; ++i) {
    text += i == changed_at ? changed_line + "\n"
                            : "epoch " + std::to_string(i) + " loss 0.5000 accuracy 0.7500\n";
  }
  return text;
}

TEST(AgreementSummary, IsOneLineWithTheToleranceAndTheRuns) {
  const auto comparison = compare_outputs("a 1\nb 2\n", "a 1\nb 2\n", {}, {});
  EXPECT_EQ(agreement_summary(comparison, {1e-3, 1e-6},
                              "original on 1 process, rewrite on 2 with split_batches"),
            "accel verify: 2 lines agree (rtol 0.001, atol 1e-06), original on 1 process, "
            "rewrite on 2 with split_batches\n");
}

TEST(AgreementSummary, SaysWhatIgnoreDropped) {
  const auto comparison = compare_outputs("t 1\na\n", "a\n", ignore_patterns({"^t "}), Tolerance{});
  EXPECT_NE(agreement_summary(comparison, {}, "runs")
                .find("1 line agrees (rtol 0.001, atol 1e-06), runs; --ignore dropped 1 line of "
                      "the original, 0 of the rewrite"),
            std::string::npos);
}

TEST(DifferenceReport, ShowsBothSidesAroundTheFirstDifferenceMarked) {
  const auto original = numbered(9, "epoch 5 loss 0.5000 accuracy 0.7500", 5);
  const auto rewrite = numbered(9, "epoch 5 loss 1.0000 accuracy 0.7500", 5);
  const Tolerance tolerance{1e-3, 1e-6};
  ReportLayout layout;
  layout.original_title = "original, 1 process";
  layout.rewrite_title = "rewrite, 2 processes, split_batches";
  const auto report =
      difference_report(compare_outputs(original, rewrite, {}, tolerance), tolerance, layout);
  const auto lines = lines_of(report);
  ASSERT_EQ(lines.size(), 10u) << report;
  EXPECT_EQ(lines[0],
            "accel verify: the outputs differ in 1 of 9 lines; the first difference is marked.");
  EXPECT_EQ(lines[1], "original, 1 process                              | rewrite, 2 processes, "
                      "split_batches");
  // Two lines of context before and after, each side numbered.
  EXPECT_EQ(lines[2], "  3 epoch 3 loss 0.5000 accuracy 0.7500          |   3 epoch 3 loss 0.5000 "
                      "accuracy 0.7500");
  EXPECT_EQ(lines[4], "> 5 epoch 5 loss 0.5000 accuracy 0.7500          | > 5 epoch 5 loss 1.0000 "
                      "accuracy 0.7500");
  EXPECT_EQ(lines[6].substr(0, 4), "  7 ");
  EXPECT_EQ(lines[7], "Line 5, number 2 on the line: the original printed 0.5000, the rewrite "
                      "1.0000.");
  EXPECT_EQ(lines[8], "  They differ by 0.5; allowed: 0.000601 = atol 1e-06 + rtol 0.001 x 0.5000");
  EXPECT_EQ(lines[9], "  + 0.0001 (one unit of the last digit printed).");
}

TEST(DifferenceReport, CountsEveryDifferingLineAndSaysWhenTheCountsDiffer) {
  const auto comparison = compare_outputs("a\nb\nc\nd\n", "a\nX\nc\n", {}, {});
  const auto report = difference_report(comparison, {}, {});
  EXPECT_NE(report.find("the outputs differ in 2 of 4 lines"), std::string::npos) << report;
  EXPECT_NE(report.find("The original printed 4 lines, the rewrite 3.\n"), std::string::npos)
      << report;
  EXPECT_NE(report.find("Line 2, the text differs:\n  original: 'b'\n  rewrite:  'X'\n"),
            std::string::npos)
      << report;
}

TEST(DifferenceReport, MarksWhereTheShorterOutputEnds) {
  const auto report = difference_report(compare_outputs("a\nb\nc\n", "a\nb\n", {}, {}), {}, {});
  EXPECT_NE(report.find("> 3 c"), std::string::npos) << report;
  EXPECT_NE(report.find("| >   (its output ends here)"), std::string::npos) << report;
  EXPECT_NE(report.find("The rewrite's output ends here; the original printed 1 line more, from "
                        "its line 3."),
            std::string::npos)
      << report;
}

TEST(DifferenceReport, NumbersLinesAsPrintedWhenIgnoreDroppedSome) {
  const auto comparison = compare_outputs("t 1\nx 1\n", "x 2\n", ignore_patterns({"^t "}), {});
  const auto report = difference_report(comparison, {}, {});
  EXPECT_NE(report.find("Line 2 of the original, 1 of the rewrite, number 1"), std::string::npos)
      << report;
  EXPECT_NE(report.find("> 2 x 1"), std::string::npos) << report;
  EXPECT_NE(report.find("> 1 x 2"), std::string::npos) << report;
}

TEST(DifferenceReport, LongLinesAreCutAroundTheDifferenceAndFitTheWidth) {
  const std::string head(150, 'a');
  const auto report = difference_report(
      compare_outputs(head + " 1 tail\n", head + " 2 tail\n", {}, {}), {}, ReportLayout{});
  for (const auto &line : lines_of(report)) {
    EXPECT_LE(columns(line), 100u) << line;
  }
  const auto marked = lines_of(report)[2];
  // Both sides start cut and show the differing number.
  EXPECT_EQ(marked.substr(0, 7), "> 1 ...") << marked;
  EXPECT_NE(marked.find(" 1 tail"), std::string::npos) << marked;
  EXPECT_NE(marked.find("| > 1 ..."), std::string::npos) << marked;
  EXPECT_NE(marked.find(" 2 tail"), std::string::npos) << marked;
  // Cut, the marked lines follow one above the other, wider.
  const auto below = lines_of(report);
  ASSERT_GE(below.size(), 5u) << report;
  EXPECT_EQ(below[3].substr(0, 15), "  original: ...") << report;
  EXPECT_EQ(below[4].substr(0, 15), "  rewrite:  ...") << report;
  EXPECT_GT(columns(below[3]), columns(marked) / 2 + 30) << report;
}

TEST(DifferenceReport, MarkedLinesThatFitAreNotRepeated) {
  const auto report = difference_report(compare_outputs("x 1\n", "x 2\n", {}, {}), {}, {});
  EXPECT_EQ(report.find("  original: "), std::string::npos) << report;
}

TEST(DifferenceReport, LinesBeforeTheDifferenceAreCutAtTheirEnd) {
  const std::string longer(120, 'b');
  const auto report = difference_report(
      compare_outputs(longer + "\nx 1\n", longer + "\nx 2\n", {}, {}), {}, ReportLayout{});
  const auto context = lines_of(report)[2];
  EXPECT_EQ(context.substr(0, 5), "  1 b");
  EXPECT_NE(context.find("bbb... | "), std::string::npos) << context;
}

TEST(DifferenceReport, TabsUtf8AndControlCharactersKeepTheColumnsAligned) {
  const auto report = difference_report(
      compare_outputs("\tcaf\xC3\xA9 \x1B[1m 1\n", "\tcaf\xC3\xA9 \x1B[1m 2\n", {}, {}), {},
      ReportLayout{});
  const auto marked = lines_of(report)[2];
  // The tab is 8 spaces, é one column, the escape ^[: the separator sits at column 49.
  EXPECT_EQ(marked.substr(0, 4), "> 1 ");
  EXPECT_NE(marked.find("        caf\xC3\xA9 ^[[1m 1"), std::string::npos) << marked;
  const auto separator = marked.find(" | ");
  ASSERT_NE(separator, std::string::npos);
  EXPECT_EQ(columns(marked.substr(0, separator)), 48u) << marked;
  EXPECT_EQ(marked.find('\x1B'), std::string::npos);
}

} // namespace
