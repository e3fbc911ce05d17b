// The analyses the rules share (rewrites/analysis): the setup function and training loops.
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "snippet.h"
#include "support/Calls.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"

#include <gtest/gtest.h>

namespace {

using namespace clang::ast_matchers;
using accel::rewrites::analyzeSetup;
using accel::rewrites::forEachStmt;
using accel::rewrites::isBackwardCall;
using accel::rewrites::isTrainingStepLoop;
using accel::rewrites::PrepareGroup;
using accel::rewrites::runsBeforePrepare;
using accel::rewrites::SetupInfo;
using clang::ASTContext;
using clang::CompoundStmt;
using clang::FunctionDecl;
using clang::Stmt;

using accel::test::NetModel;

std::vector<std::string> names(llvm::ArrayRef<const clang::VarDecl *> Vars) {
  std::vector<std::string> Names;
  for (const clang::VarDecl *Var : Vars) {
    Names.push_back(Var->getNameAsString());
  }
  return Names;
}

TEST(SetupFunction, FindsTheModelsOptimizerSchedulerAndWherePrepareGoes) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
void run() {
  Net model;
  Net unused;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::optim::StepLR scheduler(optimizer, 10);
  int epochs = 2;
  for (int e = 0; e < epochs; ++e) {
    auto loss = model->forward(torch::ones({1, 4})).sum();
    loss.backward();
  }
}
)cpp");
  ASSERT_TRUE(AST);
  SetupInfo Info = analyzeSetup(accel::test::functionNamed(*AST, "run"), AST->getASTContext());
  EXPECT_EQ(Info.Problem, "");
  ASSERT_EQ(Info.Groups.size(), 1u);
  const PrepareGroup &Group = Info.Groups.front();
  EXPECT_EQ(names(Group.Models), std::vector<std::string>{"model"});
  EXPECT_EQ(names(Group.Optimizers), std::vector<std::string>{"optimizer"});
  EXPECT_EQ(names(Group.Schedulers), std::vector<std::string>{"scheduler"});
  // The scheduler's line.
  EXPECT_EQ(AST->getSourceManager().getSpellingLineNumber(Group.LastDefinition->getBeginLoc()),
            13u);
  ASSERT_NE(Group.TrainingLoop, nullptr);
  EXPECT_TRUE(clang::isa<clang::ForStmt>(Group.TrainingLoop));
}

TEST(SetupFunction, AnOptimizerCreatedInsideALoopIsPreparedInThatLoopsBody) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
void run() {
  Net model;
  for (int e = 0; e < 2; ++e) {
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    model->forward(torch::ones({1, 4})).sum().backward();
    optimizer.step();
  }
}
)cpp");
  ASSERT_TRUE(AST);
  SetupInfo Info = analyzeSetup(accel::test::functionNamed(*AST, "run"), AST->getASTContext());
  EXPECT_EQ(Info.Problem, "");
  ASSERT_EQ(Info.Groups.size(), 1u);
  const auto *Body =
      clang::cast<clang::CompoundStmt>(accel::test::functionNamed(*AST, "run")->getBody());
  const auto *Loop = clang::cast<clang::ForStmt>(Body->body_begin()[1]);
  EXPECT_EQ(Info.Groups[0].Block, Loop->getBody());
  EXPECT_EQ(names(Info.Groups[0].Models), std::vector<std::string>{"model"});
  EXPECT_EQ(Info.Groups[0].LastDefinition, Info.Groups[0].Block->body_begin()[0]);
  EXPECT_EQ(Info.Groups[0].TrainingLoop, Info.Groups[0].Block->body_begin()[1]);
}

TEST(SetupFunction, ModelsTrainedOneAfterTheOtherArePreparedEachBeforeItsLoop) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
void run() {
  Net first;
  torch::optim::SGD first_optimizer(first->parameters(), 0.1);
  for (int e = 0; e < 2; ++e) {
    first->forward(torch::ones({1, 4})).sum().backward();
    first_optimizer.step();
  }
  Net second;
  torch::optim::SGD second_optimizer(second->parameters(), 0.1);
  torch::optim::StepLR scheduler(second_optimizer, 1);
  for (int e = 0; e < 2; ++e) {
    second->forward(torch::ones({1, 4})).sum().backward();
    second_optimizer.step();
  }
}
)cpp");
  ASSERT_TRUE(AST);
  const auto *Run = accel::test::functionNamed(*AST, "run");
  SetupInfo Info = analyzeSetup(Run, AST->getASTContext());
  EXPECT_EQ(Info.Problem, "");
  ASSERT_EQ(Info.Groups.size(), 2u);
  const auto *Body = clang::cast<clang::CompoundStmt>(Run->getBody());
  EXPECT_EQ(names(Info.Groups[0].Models), std::vector<std::string>{"first"});
  EXPECT_EQ(Info.Groups[0].LastDefinition, Body->body_begin()[1]);
  EXPECT_EQ(Info.Groups[0].TrainingLoop, Body->body_begin()[2]);
  EXPECT_EQ(names(Info.Groups[1].Models), std::vector<std::string>{"second"});
  EXPECT_EQ(names(Info.Groups[1].Schedulers), std::vector<std::string>{"scheduler"});
  EXPECT_EQ(Info.Groups[1].LastDefinition, Body->body_begin()[5]);
  EXPECT_EQ(Info.Groups[1].TrainingLoop, Body->body_begin()[6]);
}

/// A setup function whose warm-up comes before the optimizer, then a training loop.
std::string setupWithWarmup(llvm::StringRef Warmup) {
  return std::string(NetModel) + R"cpp(
void run() {
  Net model;
)cpp" + Warmup.str() +
         R"cpp(
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int e = 0; e < 2; ++e) {
    model->forward(torch::ones({1, 4})).sum().backward();
    optimizer.step();
  }
}
)cpp";
}

TEST(SetupFunction, ATrainingLoopBeforeTheOptimizerExistsIsAProblem) {
  auto AST = accel::test::parseSnippet(setupWithWarmup(R"cpp(
  for (int warmup = 0; warmup < 2; ++warmup) {
    model->forward(torch::ones({1, 4})).sum().backward();
  })cpp"));
  ASSERT_TRUE(AST);
  SetupInfo Info = analyzeSetup(accel::test::functionNamed(*AST, "run"), AST->getASTContext());
  EXPECT_EQ(Info.Problem, "the training loop starts before the model, optimizer and scheduler are "
                          "all created; call accelerator.prepare on them after they are created, "
                          "before training");
}

TEST(SetupFunction, ABackwardOutsideLoopsBeforeTheOptimizerIsADemonstration) {
  auto AST = accel::test::parseSnippet(
      setupWithWarmup("  model->forward(torch::ones({1, 4})).sum().backward();"));
  ASSERT_TRUE(AST);
  ASTContext &Ctx = AST->getASTContext();
  const FunctionDecl *Run = accel::test::functionNamed(*AST, "run");
  SetupInfo Info = analyzeSetup(Run, Ctx);
  const auto *Body = llvm::cast<CompoundStmt>(Run->getBody());
  EXPECT_EQ(Info.Problem, "");
  // Prepare goes after the optimizer; the gradient check stays as written, the loop trains.
  ASSERT_EQ(Info.Groups.size(), 1u);
  EXPECT_EQ(Info.Groups[0].LastDefinition, Body->body_begin()[2]);
  EXPECT_EQ(Info.Groups[0].TrainingLoop, Body->body_begin()[3]);
  llvm::SmallVector<const Stmt *, 2> Backwards;
  forEachStmt(Body, [&](const Stmt *S) {
    if (isBackwardCall(S)) {
      Backwards.push_back(S);
    }
  });
  ASSERT_EQ(Backwards.size(), 2u);
  EXPECT_TRUE(runsBeforePrepare(Backwards[0], Ctx));
  EXPECT_FALSE(runsBeforePrepare(Backwards[1], Ctx));
}

TEST(TrainingLoops, OnlyTheLoopAroundTheBackwardCallRunsOneStepPerIteration) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
void run(Net model, torch::optim::SGD &optimizer) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int batch = 0; batch < 3; ++batch) {
      model->forward(torch::ones({1, 4})).sum().backward();
      optimizer.step();
    }
  }
  while (false) {
  }
}
)cpp");
  ASSERT_TRUE(AST);
  clang::ASTContext &Ctx = AST->getASTContext();
  auto Epoch = match(forStmt(hasLoopInit(declStmt(has(varDecl(hasName("epoch")))))).bind("l"), Ctx);
  auto Batch = match(forStmt(hasLoopInit(declStmt(has(varDecl(hasName("batch")))))).bind("l"), Ctx);
  auto While = match(whileStmt().bind("l"), Ctx);
  ASSERT_EQ(Epoch.size(), 1u);
  ASSERT_EQ(Batch.size(), 1u);
  ASSERT_EQ(While.size(), 1u);
  EXPECT_FALSE(isTrainingStepLoop(Epoch[0].getNodeAs<clang::Stmt>("l"), Ctx));
  EXPECT_TRUE(isTrainingStepLoop(Batch[0].getNodeAs<clang::Stmt>("l"), Ctx));
  EXPECT_FALSE(isTrainingStepLoop(While[0].getNodeAs<clang::Stmt>("l"), Ctx));
}

} // namespace
