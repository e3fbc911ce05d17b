// Which statement runs each file write on the main process only, and why a write gets none
// (rewrites/analysis/FileWrites.h).
#include "analysis/AnalysisContext.h"
#include "analysis/EntryFunction.h"
#include "analysis/FileWrites.h"
#include "snippet.h"

#include "clang/Lex/Lexer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

using accel::rewrites::AnalysisContext;
using accel::rewrites::FileWriteGuards;
using accel::test::NetModel;

/// Net trained on a loader, as the body of a function.
const char *const Training = R"cpp(
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(torch::ones({8, 4}))
          .map(torch::data::transforms::Stack<torch::data::TensorExample>()), 2);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    model->forward(batch.data).sum().backward();
    optimizer.step();
  }
)cpp";

/// main training Net on a loader, with Before at its start and After at its end.
std::string program(const std::string &Helpers, const std::string &Before,
                    const std::string &After = "") {
  return std::string(NetModel) + "#include <fstream>\n" + Helpers + "int main() {\n" + Before +
         Training + After + "}\n";
}

/// The source text of each guarded statement.
std::set<std::string> guardedText(accel::test::Snippet &AST) {
  const FileWriteGuards &Guards = AnalysisContext::of(AST.getASTContext()).fileWrites();
  std::set<std::string> Texts;
  for (const clang::Stmt *S : Guards.Guarded) {
    Texts.insert(
        clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(S->getSourceRange()),
                                    AST.getSourceManager(), AST.getASTContext().getLangOpts())
            .str());
  }
  return Texts;
}

/// Every reason given for a write left unguarded.
std::string reasons(accel::test::Snippet &AST) {
  std::string All;
  for (const auto &Entry : AnalysisContext::of(AST.getASTContext()).fileWrites().WhyNot) {
    All += Entry.second + "\n";
  }
  return All;
}

const char *const WriteCsv = R"cpp(
void write_csv(const std::string &path) {
  std::ofstream out(path);
  out << "x,y\n";
}
)cpp";

TEST(FileWrites, AHelperIsGuardedAtEachOfItsCalls) {
  auto AST = accel::test::parseSnippet(
      program(WriteCsv, "  write_csv(\"a.csv\");\n", "  write_csv(\"b.csv\");\n"));
  ASSERT_TRUE(AST);
  EXPECT_EQ(guardedText(*AST),
            (std::set<std::string>{"write_csv(\"a.csv\")", "write_csv(\"b.csv\")"}));
  EXPECT_EQ(reasons(*AST), "");
}

TEST(FileWrites, AStatementThatChangesWhatTheOthersUseIsNotGuarded) {
  auto AST = accel::test::parseSnippet(
      program(R"cpp(
void write_counted(const std::string &path, int &rows) {
  std::ofstream out(path);
  rows = 3;
}
)cpp",
              "  int rows = 0;\n  write_counted(\"a.csv\", rows);\n", "  std::cout << rows;\n"));
  ASSERT_TRUE(AST);
  EXPECT_TRUE(guardedText(*AST).empty());
  EXPECT_NE(reasons(*AST).find("it changes 'rows'"), std::string::npos) << reasons(*AST);
}

TEST(FileWrites, ReadingTheModelInAWriteIsNoChange) {
  auto AST = accel::test::parseSnippet(program("", "", R"cpp(
  {
    std::ofstream out("weights.txt");
    for (const auto &p : model->parameters()) {
      out << p.sum().item<float>() << "\n";
    }
  }
)cpp"));
  ASSERT_TRUE(AST);
  EXPECT_EQ(guardedText(*AST).size(), 1u);
  EXPECT_EQ(reasons(*AST), "");
}

const char *const WriteNoise = R"cpp(
void write_noise(const std::string &path) {
  std::ofstream out(path);
  out << torch::randn({2});
}
)cpp";

TEST(FileWrites, RandomDrawsAreGuardedOnlyWhenTheGeneratorIsSeededRightAfter) {
  auto Unseeded = accel::test::parseSnippet(program(WriteNoise, "  write_noise(\"n.txt\");\n"));
  ASSERT_TRUE(Unseeded);
  EXPECT_TRUE(guardedText(*Unseeded).empty());
  EXPECT_NE(reasons(*Unseeded).find("it draws random numbers"), std::string::npos)
      << reasons(*Unseeded);

  auto Seeded = accel::test::parseSnippet(
      program(WriteNoise, "  write_noise(\"n.txt\");\n  torch::manual_seed(0);\n"));
  ASSERT_TRUE(Seeded);
  EXPECT_EQ(guardedText(*Seeded), (std::set<std::string>{"write_noise(\"n.txt\")"}));
}

TEST(FileWrites, AWriteInTheTrainingLoopKeepsItsWarning) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + R"cpp(
#include <fstream>
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(torch::ones({8, 4}))
          .map(torch::data::transforms::Stack<torch::data::TensorExample>()), 2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      model->forward(batch.data).sum().backward();
      optimizer.step();
    }
    std::ofstream log("epoch.txt");
  }
}
)cpp");
  ASSERT_TRUE(AST);
  EXPECT_TRUE(guardedText(*AST).empty());
  EXPECT_NE(reasons(*AST).find("it trains (backward at line"), std::string::npos) << reasons(*AST);
}

TEST(FileWrites, InALoopEveryProcessRunsAlikeTheGuardGoesInside) {
  auto AST = accel::test::parseSnippet(program(WriteCsv, "", R"cpp(
  std::vector<double> rates = {0.1, 0.2};
  for (double rate : rates) {
    write_csv("sweep.csv");
  }
  for (int fold = 0; fold < 2; ++fold) {
    write_csv("fold.csv");
    if (fold == 1) {
      break; // may end early: the loop goes whole
    }
  }
)cpp"));
  ASSERT_TRUE(AST);
  EXPECT_EQ(guardedText(*AST).count("write_csv(\"sweep.csv\")"), 1u);
  EXPECT_EQ(guardedText(*AST).count("write_csv(\"fold.csv\")"), 0u);
  EXPECT_EQ(guardedText(*AST).size(), 2u); // the sweep's call, and the whole fold loop
  EXPECT_EQ(reasons(*AST), "");
}

TEST(FileWrites, AMainThatWritesFilesHostsTheAcceleratorAndGuardsThem) {
  auto AST = accel::test::parseSnippet(std::string(NetModel) + "#include <fstream>\n" + WriteCsv +
                                       "void train(const std::string &path) {\n"
                                       "  std::ifstream in(path);\n" +
                                       Training + R"cpp(}
int main() {
  write_csv("data.csv");
  train("data.csv");
}
)cpp");
  ASSERT_TRUE(AST);
  const auto &Entry = AnalysisContext::of(AST->getASTContext()).entryHosting();
  ASSERT_NE(Entry.Main, nullptr);
  EXPECT_EQ(Entry.Hosted.size(), 1u);
  EXPECT_EQ(guardedText(*AST), (std::set<std::string>{"write_csv(\"data.csv\")"}));
  EXPECT_EQ(reasons(*AST), "");
}

} // namespace
