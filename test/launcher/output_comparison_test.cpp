// accel verify's comparison of two outputs (runtime/cli/output_comparison.h), on strings.
#include "output_comparison.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using accel::cli::compare_outputs;
using accel::cli::ignore_patterns;
using accel::cli::line_pieces;
using accel::cli::LineDifference;
using accel::cli::printed_lines;
using accel::cli::Tolerance;
using Kind = LineDifference::Kind;

std::vector<std::string> texts(std::string_view output) {
  std::vector<std::string> lines;
  for (const auto &line : printed_lines(output)) {
    lines.push_back(line.text);
  }
  return lines;
}

TEST(PrintedLines, SplitAtNewlinesAsATerminalShowsThem) {
  EXPECT_EQ(texts("a\nb\n"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(texts("a\r\nb"), (std::vector<std::string>{"a", "b"})); // CRLF; no final newline
  EXPECT_EQ(texts("\n\n"), (std::vector<std::string>{"", ""}));     // empty lines count
  EXPECT_EQ(texts("10%\r50%\r100%\ndone\n"), (std::vector<std::string>{"100%", "done"}));
  EXPECT_TRUE(texts("").empty());
  const auto lines = printed_lines("x\ny\n");
  EXPECT_EQ(lines[1].number, 2u);
}

TEST(LinePieces, CutLinesIntoTextAndNumbers) {
  const auto pieces = line_pieces("[64/256] loss -1.5e-03 acc .25");
  std::vector<std::string> shown;
  for (const auto &piece : pieces) {
    shown.push_back((piece.is_number ? "#" : "") + piece.text);
  }
  EXPECT_EQ(shown, (std::vector<std::string>{"[", "#64", "/", "#256", "] loss ", "#-1.5e-03",
                                             " acc ", "#.25"}));
  EXPECT_DOUBLE_EQ(pieces[5].value, -1.5e-3);
  EXPECT_EQ(pieces[5].column, 14u);
}

TEST(LinePieces, KnowHowPreciselyEachNumberWasPrinted) {
  const auto resolution = [](std::string_view text) { return line_pieces(text)[0].last_digit; };
  EXPECT_DOUBLE_EQ(resolution("0.25"), 0.01);
  EXPECT_DOUBLE_EQ(resolution("1.5e-04"), 1e-5);
  EXPECT_DOUBLE_EQ(resolution("3e2"), 100);
  EXPECT_EQ(resolution("42"), 0); // a whole number is exact as printed
}

TEST(LinePieces, APointWithoutDigitsAfterItIsText) {
  const auto pieces = line_pieces("epoch 1. done");
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].text, "1");
  EXPECT_EQ(pieces[1].last_digit, 0);
  EXPECT_EQ(pieces[2].text, ". done");
}

TEST(LinePieces, NanAndInfinityAreNumbersOnlyAsWholeWords) {
  const auto pieces = line_pieces("loss -nan inf information");
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_TRUE(pieces[1].is_number && std::isnan(pieces[1].value));
  EXPECT_TRUE(pieces[3].is_number && std::isinf(pieces[3].value));
  EXPECT_EQ(pieces[4].text, " information");
  EXPECT_FALSE(pieces[4].is_number);
}

TEST(LinePieces, AVeryLongNumberIsOnePiece) {
  const std::string digits(300000, '7'); // a std::regex would recurse once per digit
  const auto pieces = line_pieces("n " + digits);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].text.size(), digits.size());
}

TEST(CompareOutputs, EqualOutputsAgree) {
  const auto result = compare_outputs("epoch 1 loss 0.5\n", "epoch 1 loss 0.5\n", {}, {});
  EXPECT_TRUE(result.agree());
  EXPECT_EQ(result.original.size(), 1u);
}

TEST(CompareOutputs, NumbersMayDifferByTheRelativeTolerance) {
  const Tolerance tolerance{1e-3, 0};
  // Printed with 9 decimals, the last digit allows 1e-9 more: 1e-3 x 1 + 1e-9.
  EXPECT_TRUE(compare_outputs("v 1.000000000", "v 1.001000000", {}, tolerance).agree());
  EXPECT_FALSE(compare_outputs("v 1.000000000", "v 1.001000002", {}, tolerance).agree());
  // Relative to the original's value.
  EXPECT_TRUE(compare_outputs("v -200.000000", "v -200.199999", {}, tolerance).agree());
  EXPECT_FALSE(compare_outputs("v -200.000000", "v -200.201000", {}, tolerance).agree());
}

TEST(CompareOutputs, TheAbsoluteToleranceCoversValuesNearZero) {
  EXPECT_TRUE(compare_outputs("g 0.000000000", "g 0.000000999", {}, {1e-3, 1e-6}).agree());
  EXPECT_FALSE(compare_outputs("g 0.000000000", "g 0.000001100", {}, {1e-3, 1e-6}).agree());
  EXPECT_TRUE(compare_outputs("g 0.000000000", "g 0.000001100", {}, {1e-3, 2e-6}).agree());
}

TEST(CompareOutputs, RoundingInTheLastPrintedDigitIsAllowed) {
  // Values that agree can round one digit apart; no tolerance could tell them apart.
  EXPECT_TRUE(compare_outputs("acc 0.0123", "acc 0.0124", {}, {1e-3, 1e-6}).agree());
  EXPECT_FALSE(compare_outputs("acc 0.0123", "acc 0.0125", {}, {1e-3, 1e-6}).agree());
}

TEST(CompareOutputs, WholeNumbersGetNoRoundingAllowance) {
  const auto result = compare_outputs("batches 3", "batches 4", {}, {});
  ASSERT_EQ(result.differences.size(), 1u);
  EXPECT_EQ(result.differences[0].kind, Kind::Number);
  // A large count still has the relative tolerance: 60000 x 1e-3 = 60.
  EXPECT_TRUE(compare_outputs("seen 60000", "seen 60059", {}, {}).agree());
}

TEST(CompareOutputs, ANumberDifferenceSaysWhichNumberAndByHowMuch) {
  const auto result = compare_outputs("a\nepoch 3 loss 0.5500 acc 0.75\n",
                                      "a\nepoch 3 loss 1.1000 acc 0.75\n", {}, {1e-3, 1e-6});
  ASSERT_EQ(result.differences.size(), 1u);
  const auto &first = result.differences[0];
  EXPECT_EQ(first.kind, Kind::Number);
  EXPECT_EQ(first.index, 1u);
  EXPECT_EQ(first.number_ordinal, 2u);
  EXPECT_EQ(first.original_piece, "0.5500");
  EXPECT_EQ(first.rewrite_piece, "1.1000");
  EXPECT_EQ(first.original_column, 13u);
  EXPECT_NEAR(first.difference, 0.55, 1e-12);
  EXPECT_NEAR(first.allowed, 1e-6 + 0.55e-3 + 1e-4, 1e-12);
  EXPECT_DOUBLE_EQ(first.last_digit, 1e-4);
}

TEST(CompareOutputs, TextMustMatchExactly) {
  const auto result = compare_outputs("train loss 1\n", "train lost 1\n", {}, {});
  ASSERT_EQ(result.differences.size(), 1u);
  const auto &first = result.differences[0];
  EXPECT_EQ(first.kind, Kind::Text);
  EXPECT_EQ(first.original_column, 9u); // where "loss" and "lost" part
  EXPECT_EQ(first.original_piece, "train loss ");
  // A number where the other has words, and a line that ends early, are text differences.
  EXPECT_EQ(compare_outputs("x 1", "x one", {}, {}).differences[0].kind, Kind::Text);
  const auto shorter = compare_outputs("x 1 y", "x 1", {}, {});
  ASSERT_EQ(shorter.differences.size(), 1u);
  EXPECT_EQ(shorter.differences[0].rewrite_piece, "");
  EXPECT_EQ(shorter.differences[0].rewrite_column, 3u);
}

TEST(CompareOutputs, NanMatchesNanAndInfinityItself) {
  EXPECT_TRUE(compare_outputs("loss nan", "loss -nan", {}, {}).agree());
  EXPECT_TRUE(compare_outputs("loss inf", "loss inf", {}, {}).agree());
  EXPECT_FALSE(compare_outputs("loss inf", "loss -inf", {}, {}).agree());
  EXPECT_FALSE(compare_outputs("loss 0.5", "loss nan", {}, {}).agree());
}

TEST(CompareOutputs, EveryDifferingLineIsListed) {
  const auto result = compare_outputs("1\n2\n3\n4\n", "1\n9\n3\n9\n", {}, {});
  ASSERT_EQ(result.differences.size(), 2u);
  EXPECT_EQ(result.differences[0].index, 1u);
  EXPECT_EQ(result.differences[1].index, 3u);
}

TEST(CompareOutputs, DifferentLineCountsDiffer) {
  auto result = compare_outputs("a\nb\nc\n", "a\nb\n", {}, {});
  ASSERT_EQ(result.differences.size(), 1u);
  EXPECT_EQ(result.differences[0].kind, Kind::MissingInRewrite);
  EXPECT_EQ(result.differences[0].index, 2u);
  result = compare_outputs("a\n", "a\nb\n", {}, {});
  ASSERT_EQ(result.differences.size(), 1u);
  EXPECT_EQ(result.differences[0].kind, Kind::MissingInOriginal);
}

TEST(CompareOutputs, IgnoredLinesAreDroppedOnBothSidesAndKeepTheirNumbers) {
  const auto ignore = ignore_patterns({"took [0-9.]+ s", "^#"});
  const auto result =
      compare_outputs("# header\nepoch 1 took 3.2 s\nloss 0.5\n",
                      "epoch 1 took 1.7 s\n# header\n# more\nloss 0.5\n", ignore, {});
  EXPECT_TRUE(result.agree());
  EXPECT_EQ(result.ignored_original, 2u);
  EXPECT_EQ(result.ignored_rewrite, 3u);
  ASSERT_EQ(result.rewrite.size(), 1u);
  EXPECT_EQ(result.rewrite[0].number, 4u);
}

TEST(CompareOutputs, ABadPatternIsAnErrorNamingIt) {
  try {
    ignore_patterns({"ok", "(unclosed"});
    FAIL() << "no error";
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find("--ignore: '(unclosed' is not a regular expression"),
              std::string::npos)
        << error.what();
  }
}

} // namespace
