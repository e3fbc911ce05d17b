// Loops that cut their batches by a counter: what accel-data-loader shares, and why a loop it
// cannot share is declined (rewrites/analysis/CountedBatchLoops.h).
#include "analysis/AnalysisContext.h"
#include "analysis/CountedBatchLoops.h"
#include "snippet.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Lex/Lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace clang::ast_matchers;
using accel::rewrites::AnalysisContext;
using accel::rewrites::CountedBatchLoop;
using accel::test::NetModel;

/// A function training Net on batches that Loop cuts from `inputs` (16 rows); Loop names its
/// counter `i` and Setup comes before it.
std::string program(const std::string &Setup, const std::string &Loop) {
  return std::string(NetModel) + R"cpp(
#include <algorithm>
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto inputs = torch::randn({16, 4});
  int64_t n = 16, batch = 4;
)cpp" + Setup +
         Loop + "}\n";
}

/// The analysis of the for-loop whose counter is `i`.
const CountedBatchLoop &loopOfI(accel::test::Snippet &AST) {
  clang::ASTContext &Ctx = AST.getASTContext();
  auto Found = match(
      forStmt(isExpansionInMainFile(), hasLoopInit(declStmt(hasSingleDecl(varDecl(hasName("i"))))))
          .bind("loop"),
      Ctx);
  EXPECT_EQ(Found.size(), 1u);
  if (Found.empty()) {
    static const CountedBatchLoop None;
    return None;
  }
  return AnalysisContext::of(Ctx).countedBatchLoop(Found.front().getNodeAs<clang::ForStmt>("loop"));
}

std::vector<std::string> cutTexts(accel::test::Snippet &AST, const CountedBatchLoop &Loop) {
  std::vector<std::string> Texts;
  for (const clang::Stmt *Cut : Loop.Cuts) {
    Texts.push_back(
        clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(Cut->getSourceRange()),
                                    AST.getSourceManager(), AST.getASTContext().getLangOpts())
            .str());
  }
  return Texts;
}

std::vector<std::string> batchSizeNames(const CountedBatchLoop &Loop) {
  std::vector<std::string> Names;
  for (const clang::VarDecl *Var : Loop.BatchSizes) {
    Names.push_back(Var->getNameAsString());
  }
  return Names;
}

const char *const Step = R"cpp(
    optimizer.zero_grad();
    model->forward(x).sum().backward();
    optimizer.step();
  }
)cpp";

TEST(CountedBatchLoops, APermutationSlicedAndGatheredIsShared) {
  auto AST = accel::test::parseSnippet(program("  auto perm = torch::randperm(n);\n", R"cpp(
  for (int64_t i = 0; i < n; i += batch) {
    auto idx = perm.slice(0, i, std::min(i + batch, n));
    auto x = inputs.index_select(0, idx);
)cpp" + std::string(Step)));
  ASSERT_TRUE(AST);
  const CountedBatchLoop &Loop = loopOfI(*AST);
  EXPECT_TRUE(Loop.shareable()) << Loop.Problem;
  EXPECT_EQ(cutTexts(*AST, Loop),
            (std::vector<std::string>{"perm.slice(0, i, std::min(i + batch, n))"}));
  EXPECT_EQ(batchSizeNames(Loop), (std::vector<std::string>{"batch"}));
  ASSERT_NE(Loop.Step, nullptr);
}

TEST(CountedBatchLoops, ABatchIndexNarrowingTheDataIsShared) {
  auto AST = accel::test::parseSnippet(program("  const int64_t batches = n / batch;\n", R"cpp(
  for (int i = 0; i < batches; ++i) {
    auto x = inputs.narrow(0, i * batch, batch);
)cpp" + std::string(Step)));
  ASSERT_TRUE(AST);
  const CountedBatchLoop &Loop = loopOfI(*AST);
  EXPECT_TRUE(Loop.shareable()) << Loop.Problem;
  EXPECT_EQ(Loop.Step, nullptr);
  EXPECT_EQ(batchSizeNames(Loop), (std::vector<std::string>{"batch"}));
}

TEST(CountedBatchLoops, ALoopThatCutsNothingIsNoCountedLoop) {
  // An epoch loop over the whole data set, and one that takes single samples of a tensor.
  auto AST = accel::test::parseSnippet(program("", R"cpp(
  for (int i = 0; i < 3; ++i) {
    auto x = inputs;
)cpp" + std::string(Step)));
  ASSERT_TRUE(AST);
  EXPECT_FALSE(loopOfI(*AST).Counted);
  auto Samples = accel::test::parseSnippet(program("", R"cpp(
  for (int64_t i = 0; i < inputs.size(0); ++i) {
    auto x = inputs[i];
)cpp" + std::string(Step)));
  ASSERT_TRUE(Samples);
  EXPECT_FALSE(loopOfI(*Samples).Counted);
}

TEST(CountedBatchLoops, ABatchTakenFromAListByTheCounterIsACut) {
  // Batches made beforehand (`split`): list[i] is the cut, and taking it (a reference that is
  // not const) leaves the bound list.size() as it was.
  auto AST = accel::test::parseSnippet(
      program("  std::vector<torch::Tensor> list = inputs.split(2);\n", R"cpp(
  for (size_t i = 0; i < list.size(); ++i) {
    auto x = list[i];
)cpp" + std::string(Step)));
  ASSERT_TRUE(AST);
  const CountedBatchLoop &Loop = loopOfI(*AST);
  EXPECT_TRUE(Loop.shareable()) << Loop.Problem;
  ASSERT_EQ(Loop.Cuts.size(), 1u);
  EXPECT_TRUE(llvm::isa<clang::CXXOperatorCallExpr>(Loop.Cuts.front()));
  EXPECT_TRUE(Loop.BatchSizes.empty());
}

TEST(CountedBatchLoops, AnOffsetComputedFromTheCounterCutsLikeTheCounter) {
  // `start = i * batch` read only by the cuts: the cuts are shared, start is an offset, and
  // batch sizes the batches (in start's initializer and in the cuts).
  auto AST = accel::test::parseSnippet(program("  const int64_t batches = n / batch;\n", R"cpp(
  for (int64_t i = 0; i < batches; ++i) {
    const int64_t start = i * batch;
    auto x = inputs.slice(0, start, start + batch);
)cpp" + std::string(Step)));
  ASSERT_TRUE(AST);
  const CountedBatchLoop &Loop = loopOfI(*AST);
  EXPECT_TRUE(Loop.shareable()) << Loop.Problem;
  EXPECT_EQ(cutTexts(*AST, Loop), (std::vector<std::string>{"inputs.slice(0, start, start + batch)"}));
  ASSERT_EQ(Loop.Offsets.size(), 1u);
  EXPECT_EQ(Loop.Offsets.front()->getNameAsString(), "start");
  EXPECT_EQ(batchSizeNames(Loop), (std::vector<std::string>{"batch"}));
}

/// The problem of the loop in `Loop` (after `Setup`), which must be a counted loop.
std::string problemOf(const std::string &Setup, const std::string &Loop) {
  auto AST = accel::test::parseSnippet(program(Setup, Loop + Step));
  if (!AST) {
    return "<no parse>";
  }
  const CountedBatchLoop &Analysis = loopOfI(*AST);
  EXPECT_TRUE(Analysis.Counted);
  return Analysis.Problem;
}

TEST(CountedBatchLoops, WhatWouldChangeTheLoopsMeaningIsSaid) {
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n; i += batch) {
    std::cout << i << "\n";
    auto x = inputs.slice(0, i, i + batch);
)cpp")
                .find("uses 'i' for something else too (line "),
            std::string::npos);
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n; i += batch) {
    auto x = inputs.slice(0, i, i + batch);
    i += batch;
)cpp")
                .find("uses 'i' for something else too"),
            std::string::npos);
  // An offset computed from the counter, used for something else too, or changed.
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n / batch; ++i) {
    int64_t start = i * batch;
    std::cout << start << "\n";
    auto x = inputs.slice(0, start, start + batch);
)cpp")
                .find("uses 'start', computed from 'i', for something else too (line "),
            std::string::npos);
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n / batch; ++i) {
    int64_t start = i * batch;
    start += 1;
    auto x = inputs.slice(0, start, start + batch);
)cpp")
                .find("uses 'start', computed from 'i', for something else too"),
            std::string::npos);
  // A batch taken from a list by a reference that the loop reassigns.
  EXPECT_NE(problemOf("  std::vector<torch::Tensor> list = inputs.split(2);\n", R"cpp(
  for (size_t i = 0; i < list.size(); ++i) {
    auto& x = list[i];
    x = x * 2;
)cpp")
                .find("takes its batch by a reference that is not const ('x'), and changes "
                      "what it names (line "),
            std::string::npos);
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n; i += batch) {
    auto x = inputs.slice(0, i, i + batch);
    if (x.sum().item<float>() > 100) break;
)cpp")
                .find("can leave early"),
            std::string::npos);
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n; i += batch) {
    auto x = inputs.slice(0, i, i + batch);
    n -= 1;
)cpp")
                .find("the loop changes 'n', which its condition reads"),
            std::string::npos);
  EXPECT_NE(problemOf("  std::vector<int> sizes = {4};\n", R"cpp(
  for (int64_t i = 0; i < n; i += sizes.back()) {
    auto x = inputs.slice(0, i, i + 4);
    sizes.push_back(4);
)cpp")
                .find("this loop over batches cannot be shared: "),
            std::string::npos);
  EXPECT_NE(problemOf("", R"cpp(
  for (int64_t i = 0; i < n; i += batch) {
    torch::Tensor x;
    for (int k = 0; k < 1; ++k) x = inputs.slice(0, i, i + batch);
)cpp")
                .find("cuts a batch in a loop inside it"),
            std::string::npos);
}

} // namespace
