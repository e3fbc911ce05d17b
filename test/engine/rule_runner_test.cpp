// RuleRunner: matches become findings and main-file edits, with the macro guard and the
// gating every front end shares.
#include "snippet.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

namespace {

using accel::rewrites::FileFindings;
using accel::rewrites::RuleFinding;
using accel::test::rewrite;
using accel::test::runRules;

const std::string TrainingProgram = std::string(accel::test::NetModel) + R"cpp(
#define STEP(l) l.backward()

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int i = 0; i < 3; ++i) {
    optimizer.zero_grad();
    auto loss = model->forward(torch::ones({1, 4})).sum();
    loss.backward();
    optimizer.step();
  }
  return 0;
}
)cpp";

const RuleFinding *findingOf(const FileFindings &Found, llvm::StringRef Rule) {
  auto It = llvm::find_if(Found.Findings, [&](const RuleFinding &F) { return F.Rule == Rule; });
  return It == Found.Findings.end() ? nullptr : &*It;
}

TEST(RuleRunner, ABackwardCallBecomesAcceleratorBackwardWithItsPosition) {
  // The include and the Accelerator come along with the selected rule.
  FileFindings Found = runRules(TrainingProgram, "backward");
  ASSERT_EQ(Found.Findings.size(), 3u);
  ASSERT_NE(findingOf(Found, "accel-backward"), nullptr);
  const RuleFinding &Backward = *findingOf(Found, "accel-backward");
  EXPECT_EQ(Backward.Rule, "accel-backward");
  EXPECT_TRUE(Backward.Rewrite);
  EXPECT_EQ(Backward.Line, 17u);
  EXPECT_EQ(Backward.Column, 5u);
  ASSERT_EQ(Backward.Fix.size(), 1u);
  EXPECT_EQ(Backward.Fix[0].Text, "accelerator.backward(loss)");
  EXPECT_EQ(Backward.Fix[0].BeginLine, 17u);
  EXPECT_EQ(Backward.Fix[0].EndColumn, 20u);
  EXPECT_TRUE(Backward.Loc.isValid());
  EXPECT_EQ(Found.Edits.size(), 3u);
}

TEST(RuleRunner, TheIncludeAndTheAcceleratorComeOnlyWithAnotherRulesEdit) {
  // Alone, the companions change nothing: a file no other rule edits stays as it is.
  FileFindings Alone = runRules(TrainingProgram, "include,accelerator");
  EXPECT_TRUE(Alone.Edits.empty());
  EXPECT_TRUE(llvm::none_of(Alone.Findings, [](const RuleFinding &F) { return F.Rewrite; }));

  FileFindings WithBackward = runRules(TrainingProgram, "backward");
  ASSERT_NE(findingOf(WithBackward, "accel-include"), nullptr);
  ASSERT_NE(findingOf(WithBackward, "accel-accelerator"), nullptr);
  EXPECT_EQ(WithBackward.Edits.size(), 3u);
  std::string Result = rewrite(TrainingProgram, "backward");
  EXPECT_NE(Result.find("#include <accelerate/accelerate.h>"), std::string::npos) << Result;
  EXPECT_NE(Result.find("accelerate::Accelerator accelerator("), std::string::npos) << Result;
  EXPECT_NE(Result.find("accelerator.backward(loss);"), std::string::npos) << Result;
}

TEST(RuleRunner, NothingInsideAMacroExpansionIsEditedAndTheWarningNamesTheMacro) {
  std::string Program = TrainingProgram;
  Program.replace(Program.find("loss.backward();"), 16, "STEP(loss);     ");
  FileFindings Found = runRules(Program, "backward");
  // No edit of the backward rule, so none of its companions either.
  EXPECT_TRUE(Found.Edits.empty());
  ASSERT_EQ(Found.Findings.size(), 1u);
  EXPECT_FALSE(Found.Findings[0].Rewrite);
  EXPECT_EQ(Found.Findings[0].Message,
            "not rewritten: this is inside the expansion of macro 'STEP'; make the edit by hand "
            "(accelerator.backward runs backward and completes the gradient all-reduce across "
            "processes)");
  EXPECT_EQ(Found.Findings[0].Line, 17u);
}

TEST(RuleRunner, AFunctionWithoutTheAcceleratorGetsTheManualEditAsAWarning) {
  std::string Program = TrainingProgram + R"cpp(
void helper(torch::Tensor loss) { loss.backward(); }
)cpp";
  FileFindings Found = runRules(Program, "backward");
  auto Warning = llvm::find_if(Found.Findings, [](const RuleFinding &F) { return !F.Rewrite; });
  ASSERT_NE(Warning, Found.Findings.end());
  EXPECT_EQ(Warning->Message,
            "backward in 'helper', which has no accelerator: add a parameter "
            "'accelerate::Accelerator& accelerator' to it, pass the accelerator in, and call "
            "accelerator.backward(loss)");
  EXPECT_TRUE(Warning->Fix.empty());
}

TEST(RuleRunner, ResetForgetsThePreviousTranslationUnit) {
  auto Rules = accel::rewrites::selectRules("backward", accel::rewrites::allRules());
  ASSERT_TRUE(bool(Rules));
  accel::rewrites::RuleRunner Runner(*Rules);
  auto AST = accel::test::parseSnippet(TrainingProgram);
  ASSERT_TRUE(AST);
  Runner.match(AST->getASTContext(), accel::test::snippetDecls(*AST));
  EXPECT_EQ(Runner.finish("input.cpp").Findings.size(), 3u);
  Runner.reset();
  EXPECT_TRUE(Runner.finish("input.cpp").Findings.empty());
}

} // namespace
