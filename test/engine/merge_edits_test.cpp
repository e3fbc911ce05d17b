// mergeEdits and applyEdits: how the rules' edits of one file become one result.
#include "accel/rewrites/Engine.h"

#include <gtest/gtest.h>

namespace {

using accel::rewrites::applyEdits;
using accel::rewrites::mergeEdits;
using accel::rewrites::TextEdit;

/// Code with Edits merged and applied; "<conflict>" when they do not combine.
std::string applyMerged(llvm::StringRef Code, const std::set<TextEdit> &Edits,
                        std::vector<std::string> &Warnings) {
  std::optional<clang::tooling::Replacements> Merged =
      mergeEdits(Edits, "input.cpp", Code, Warnings);
  if (!Merged) {
    return "<conflict>";
  }
  llvm::Expected<std::string> Result = clang::tooling::applyAllReplacements(Code, *Merged);
  EXPECT_TRUE(bool(Result));
  return Result ? *Result : std::string();
}

TEST(MergeEdits, TheSameEditFoundTwiceAppliesOnce) {
  std::vector<std::string> Warnings;
  std::string Result = applyMerged("a b c", {{2, 1, "B", 0}, {2, 1, "B", 3}}, Warnings);
  EXPECT_EQ(Result, "a B c");
  EXPECT_TRUE(Warnings.empty());
}

TEST(MergeEdits, InsertionsAtOnePlaceGoInRuleOrder) {
  std::vector<std::string> Warnings;
  // Rule 2's insertion is listed first; rule 1's still comes first in the text.
  std::string Result = applyMerged("ab", {{1, 0, "<two>", 2}, {1, 0, "<one>", 1}}, Warnings);
  EXPECT_EQ(Result, "a<one><two>b");
  EXPECT_TRUE(Warnings.empty());
}

TEST(MergeEdits, AnInsertionBeforeAReplacementAtOnePlaceKeepsBoth) {
  std::vector<std::string> Warnings;
  std::string Result = applyMerged("x = f(y);", {{0, 0, "int ", 0}, {0, 1, "z", 1}}, Warnings);
  EXPECT_EQ(Result, "int z = f(y);");
  EXPECT_TRUE(Warnings.empty());
}

TEST(MergeEdits, EditsThatCrossAreAConflictAndNothingApplies) {
  std::vector<std::string> Warnings;
  std::string Result = applyMerged("0123456789", {{2, 4, "A", 0}, {4, 4, "B", 1}}, Warnings);
  EXPECT_EQ(Result, "<conflict>");
  ASSERT_EQ(Warnings.size(), 1u);
  EXPECT_EQ(Warnings[0], "input.cpp:1: warning: two rules edit the same code here in ways "
                         "accel-rewrite cannot combine, so the file is left as written; rewrite "
                         "this line by hand and run accel-rewrite again (and please report it)");
}

TEST(MergeEdits, AWrapInsideAReplacementThatKeepsTheCodeGoesIntoItsText) {
  // accel-backward replaces the whole call and keeps the loss as written; accel-data-loader
  // wraps the cut inside it.
  std::string Code = "  f(x.narrow(0, i, 8)).sum().backward();\n";
  const unsigned Call = 2, CallLength = unsigned(Code.find(';')) - Call;
  const unsigned Cut = unsigned(Code.find("x.narrow")), CutEnd = unsigned(Code.find(")).sum")) + 1;
  std::vector<std::string> Warnings;
  std::string Result =
      applyMerged(Code,
                  {{Call, CallLength, "accelerator.backward(f(x.narrow(0, i, 8)).sum())", 0},
                   {Cut, 0, "accelerator.batch_rows(", 1},
                   {CutEnd, 0, ")", 1}},
                  Warnings);
  EXPECT_EQ(Result,
            "  accelerator.backward(f(accelerator.batch_rows(x.narrow(0, i, 8))).sum());\n");
  EXPECT_TRUE(Warnings.empty());
}

TEST(MergeEdits, AnEditInsideAReplacementThatDropsItsCodeIsAConflict) {
  std::vector<std::string> Warnings;
  std::string Result =
      applyMerged("call(alpha, beta);", {{0, 17, "other()", 0}, {5, 5, "A", 1}}, Warnings);
  EXPECT_EQ(Result, "<conflict>");
  EXPECT_EQ(Warnings.size(), 1u);
}

TEST(MergeEdits, AShorterReplacementAtTheSamePlaceGoesInsideTheLongerOne) {
  std::vector<std::string> Warnings;
  std::string Result = applyMerged("model(x).backward();",
                                   {{0, 5, "net", 1}, {0, 19, "run(model(x))", 0}}, Warnings);
  EXPECT_EQ(Result, "run(net(x));");
  EXPECT_TRUE(Warnings.empty());
}

TEST(MergeEdits, AdjacentEditsBothApply) {
  std::vector<std::string> Warnings;
  std::string Result = applyMerged("abcd", {{0, 2, "X", 0}, {2, 2, "Y", 1}}, Warnings);
  EXPECT_EQ(Result, "XY");
  EXPECT_TRUE(Warnings.empty());
}

TEST(ApplyEdits, LinesTheEditsDoNotTouchStayByteForByte) {
  // Tabs, a hand-wrapped call and an unusual brace style around one inserted statement.
  std::string Code = "void f()\n"
                     "{\n"
                     "\tint a =   1;\n"
                     "\tg(a,\n"
                     "\t      a);\n"
                     "}\n";
  std::vector<std::string> Warnings;
  size_t At = Code.find("\tg(");
  std::optional<clang::tooling::Replacements> Edits =
      mergeEdits({{unsigned(At), 0, "\th(a);\n", 0}}, "input.cpp", Code, Warnings);
  ASSERT_TRUE(Edits.has_value());
  clang::tooling::Replacements Composed;
  std::string Result = applyEdits("input.cpp", Code, *Edits, Composed);
  EXPECT_NE(Result.find("\tint a =   1;\n\t"), std::string::npos) << Result;
  EXPECT_NE(Result.find("\tg(a,\n\t      a);\n}\n"), std::string::npos) << Result;
  EXPECT_NE(Result.find("h(a);"), std::string::npos) << Result;
  // Composed reproduces the result from the original text.
  llvm::Expected<std::string> Again = clang::tooling::applyAllReplacements(Code, Composed);
  ASSERT_TRUE(bool(Again));
  EXPECT_EQ(*Again, Result);
}

TEST(ApplyEdits, NoEditsLeaveTheTextAsItIs) {
  clang::tooling::Replacements Composed;
  EXPECT_EQ(applyEdits("input.cpp", "int  x ;\n", {}, Composed), "int  x ;\n");
  EXPECT_TRUE(Composed.empty());
}

} // namespace
