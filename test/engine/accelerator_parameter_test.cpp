// The analysis behind accel-accelerator's helper parameters (utils/AcceleratorParameter.h):
// which helpers get `accelerate::Accelerator &accelerator`, which calls pass it, and why a
// helper that trains cannot get it.
#include "analysis/AcceleratorParameter.h"
#include "snippet.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"

#include <gtest/gtest.h>

namespace {

using namespace clang::ast_matchers;
using accel::rewrites::acceleratorParameterPlan;
using accel::rewrites::callPassingAccelerator;
using accel::rewrites::receivesAcceleratorParameter;
using accel::test::NetModel;

TEST(AcceleratorParameter, HelpersThatTrainOrPrintGetItAndEveryCallPassesIt) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
#include <cstdio>
template <typename Loader> void epoch(Net &model, Loader &loader) {
  for (auto &batch : loader) {
    model->forward(batch).sum().backward();
  }
}
template <typename Loader> void fit(Net &model, Loader &loader) { epoch(model, loader); }
void report() { std::printf("done\n"); }
void quiet(int) {}
struct Trainer {
  virtual void step(Net &model) { model->forward(torch::ones({1, 4})).sum().backward(); }
  virtual ~Trainer() = default;
};
void elsewhere(Net &model) { model->forward(torch::ones({1, 4})).sum().backward(); }
void no_accelerator(Net &model) { elsewhere(model); }
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  std::vector<torch::Tensor> loader = {torch::ones({1, 4})};
  fit(model, loader);
  report();
  quiet(1);
  Trainer().step(model);
}
)cpp");
  ASSERT_TRUE(AST);
  clang::ASTContext &Ctx = AST->getASTContext();
  auto Function = [&](const std::string &Name) {
    return accel::test::functionNamed(*AST, "::" + Name);
  };

  // Dependent calls in templates count: fit calls epoch, main calls fit.
  EXPECT_TRUE(receivesAcceleratorParameter(Function("epoch"), Ctx));
  EXPECT_TRUE(receivesAcceleratorParameter(Function("fit"), Ctx));
  EXPECT_TRUE(receivesAcceleratorParameter(Function("report"), Ctx));
  EXPECT_FALSE(receivesAcceleratorParameter(Function("quiet"), Ctx));
  EXPECT_EQ(acceleratorParameterPlan(Function("quiet"), Ctx), nullptr);

  const auto *Virtual = acceleratorParameterPlan(Function("Trainer::step"), Ctx);
  ASSERT_NE(Virtual, nullptr);
  EXPECT_TRUE(Virtual->Trains);
  EXPECT_FALSE(Virtual->Receives);
  EXPECT_EQ(Virtual->Problem, "it is virtual, and its overrides would not get the parameter");

  // A caller without the accelerator cannot pass it, so neither gets it.
  const auto *Elsewhere = acceleratorParameterPlan(Function("elsewhere"), Ctx);
  ASSERT_NE(Elsewhere, nullptr);
  EXPECT_FALSE(Elsewhere->Receives);
  EXPECT_EQ(Elsewhere->Problem,
            "it is called from 'no_accelerator', which has no accelerator to pass");

  // The calls that must pass it: fit's call of epoch and main's calls of fit and report.
  size_t Passing = 0;
  for (const auto &Found : match(callExpr().bind("call"), Ctx)) {
    const auto *Call = Found.getNodeAs<clang::CallExpr>("call");
    if (Ctx.getSourceManager().isInMainFile(Call->getBeginLoc()) &&
        callPassingAccelerator(Call, Ctx)) {
      ++Passing;
    }
  }
  EXPECT_EQ(Passing, 3u);
}

} // namespace
