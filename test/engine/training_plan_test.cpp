// The plan of each training loop (rewrites/analysis/TrainingPlan.h): what a loop trains,
// where its optimizers are created and prepared, what it iterates, and what a declined loop
// takes with it.
#include "analysis/AnalysisContext.h"
#include "analysis/TrainingPlan.h"
#include "snippet.h"

#include <gtest/gtest.h>

namespace {

using accel::rewrites::AnalysisContext;
using accel::rewrites::LoopPlan;
using accel::rewrites::TrainingPlans;
using accel::test::NetModel;

/// A dataset of 4 features and the loader helper the snippets share, after NetModel.
const char *const Data = R"cpp(
auto make_dataset() {
  return torch::data::datasets::TensorDataset(torch::randn({8, 4}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}
)cpp";

const LoopPlan *planIn(const TrainingPlans &Plans, llvm::StringRef Function) {
  for (const LoopPlan &Plan : Plans.Loops) {
    if (Plan.Function && Plan.Function->getName() == Function) {
      return &Plan;
    }
  }
  return nullptr;
}

TEST(TrainingPlan, FollowsAHelpersOptimizerAndLoaderToWhereTheyAreCreated) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + Data + R"cpp(
template <typename Loader>
void epoch(Net &model, torch::optim::Optimizer &optimizer, Loader &loader) {
  for (auto &batch : loader) {
    optimizer.zero_grad();
    model->forward(batch.data).sum().backward();
    optimizer.step();
  }
}
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 2);
  epoch(model, optimizer, *loader);
}
)cpp");
  ASSERT_TRUE(AST);
  const TrainingPlans &Plans = AnalysisContext::of(AST->getASTContext()).trainingPlans();
  ASSERT_EQ(Plans.Loops.size(), 1u);
  const LoopPlan *Plan = planIn(Plans, "epoch");
  ASSERT_NE(Plan, nullptr);
  EXPECT_EQ(Plan->Problem, "");
  EXPECT_EQ(Plan->Kind, LoopPlan::Loop);
  ASSERT_EQ(Plan->Optimizers.size(), 1u);
  EXPECT_EQ(Plan->Optimizers[0]->getName(), "optimizer");
  ASSERT_NE(Plan->Setup, nullptr);
  EXPECT_EQ(Plan->Setup->getName(), "main");
  ASSERT_NE(Plan->Loader, nullptr);
  EXPECT_EQ(Plan->Loader->getName(), "loader"); // epoch's parameter, fed main's sharded loader
  EXPECT_TRUE(Plans.DeclinedRanges.empty());
}

TEST(TrainingPlan, ADeclinedLoopTakesItsSetupHelpersAndLoaderWithIt) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + Data + R"cpp(
template <typename Loader> void fit(Net model, Loader &loader) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (auto &batch : loader) {
    model->forward(batch.data).sum().backward();
    optimizer.step();
  }
}
void experiment() {
  Net model;
  auto loader = torch::data::make_data_loader(make_dataset(), 2);
  fit(model, *loader);
}
void other() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 2);
  for (auto &batch : *loader) {
    model->forward(batch.data).sum().backward();
    optimizer.step();
  }
}
)cpp");
  ASSERT_TRUE(AST);
  const TrainingPlans &Plans = AnalysisContext::of(AST->getASTContext()).trainingPlans();
  const LoopPlan *Fit = planIn(Plans, "fit");
  const LoopPlan *Other = planIn(Plans, "other");
  ASSERT_NE(Fit, nullptr);
  ASSERT_NE(Other, nullptr);
  // fit prepares the model it is given, but the loader comes from a function without an
  // accelerator, which cannot shard it.
  EXPECT_NE(Fit->Problem.find("the batches of this training loop come from 'loader', which "
                              "accel-rewrite cannot shard"),
            std::string::npos)
      << Fit->Problem;
  EXPECT_EQ(Other->Problem, "");

  const clang::SourceManager &SM = AST->getSourceManager();
  auto Declined = [&](llvm::StringRef Code) {
    std::string Text = SM.getBufferData(SM.getMainFileID()).str();
    size_t Offset = Text.find(Code.str());
    EXPECT_NE(Offset, std::string::npos) << Code.str();
    return Plans.declines(static_cast<unsigned>(Offset));
  };
  // The loop's function, and the loader made in the function that hands it over.
  EXPECT_TRUE(Declined("optimizer.step();\n  }\n}\nvoid experiment"));
  EXPECT_TRUE(Declined("torch::data::make_data_loader(make_dataset(), 2);\n  fit"));
  // Not the other experiment.
  EXPECT_FALSE(Declined("torch::data::make_data_loader(make_dataset(), 2);\n  for"));
}

TEST(TrainingPlan, DeclinesBatchesNoRuleSharesAndPlansAStepOutsideLoops) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
#include <vector>
void permutation_batches() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto rows = torch::ones({8, 4});
  auto order = torch::randperm(8);
  for (int64_t start = 0; start < 8; start += 2) {
    model->forward(rows.index_select(0, order.slice(0, start, start + 2))).sum().backward();
    optimizer.step();
  }
}
void while_batches() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto rows = torch::ones({8, 4});
  int64_t start = 0;
  while (start < 8) {
    model->forward(rows.slice(0, start, start + 2)).sum().backward();
    optimizer.step();
    start += 2;
  }
}
void one_step() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  model->forward(torch::ones({2, 4})).sum().backward();
  optimizer.step();
}
void step_in(Net &model, torch::optim::SGD &optimizer) {
  model->forward(torch::ones({2, 4})).sum().backward();
  optimizer.step();
}
void helper_step() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  step_in(model, optimizer);
}
void saliency() {
  Net model;
  auto input = torch::ones({2, 4}).requires_grad_();
  model->forward(input).sum().backward();
}
// A std::vector of batches is shared by accelerator.prepare_batches: planned, not declined.
void vector_batches() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  std::vector<torch::Tensor> batches = {torch::ones({2, 4})};
  for (const auto &batch : batches) {
    model->forward(batch).sum().backward();
    optimizer.step();
  }
}
)cpp");
  ASSERT_TRUE(AST);
  const TrainingPlans &Plans = AnalysisContext::of(AST->getASTContext()).trainingPlans();
  const LoopPlan *Permutation = planIn(Plans, "permutation_batches");
  const LoopPlan *While = planIn(Plans, "while_batches");
  const LoopPlan *Step = planIn(Plans, "one_step");
  const LoopPlan *Vector = planIn(Plans, "vector_batches");
  ASSERT_NE(Permutation, nullptr);
  ASSERT_NE(While, nullptr);
  ASSERT_NE(Step, nullptr);
  ASSERT_NE(Vector, nullptr);
  // A permutation cut by the loop's counter is shared through it (CountedBatchLoops.h).
  EXPECT_TRUE(Permutation->sound()) << Permutation->Problem;
  ASSERT_NE(Permutation->Loader, nullptr);
  EXPECT_EQ(Permutation->Loader->getName(), "start");
  EXPECT_NE(While->Problem.find("come from a loop over no loader, which accel-rewrite "
                                "cannot shard"),
            std::string::npos)
      << While->Problem;
  // A step written out where its optimizer is made: planned whole, on the batch as written.
  EXPECT_EQ(Step->Kind, LoopPlan::StraightLine);
  EXPECT_TRUE(Step->sound()) << Step->Problem;
  EXPECT_EQ(Step->Loader, nullptr);
  ASSERT_EQ(Step->Optimizers.size(), 1u);
  EXPECT_EQ(Step->Optimizers[0]->getName(), "optimizer");
  // Elsewhere than where the optimizer is made, or with no step beside it: declined.
  const LoopPlan *Helper = planIn(Plans, "step_in");
  ASSERT_NE(Helper, nullptr);
  EXPECT_NE(Helper->Problem.find("a training step outside any loop: 'step_in' is called once"),
            std::string::npos)
      << Helper->Problem;
  const LoopPlan *Saliency = planIn(Plans, "saliency");
  ASSERT_NE(Saliency, nullptr);
  EXPECT_NE(Saliency->Problem.find("has no optimizer.step() outside a loop beside it"),
            std::string::npos)
      << Saliency->Problem;
  EXPECT_TRUE(Vector->sound()) << Vector->Problem;
  ASSERT_NE(Vector->Loader, nullptr);
  EXPECT_EQ(Vector->Loader->getName(), "batches");
}

} // namespace
