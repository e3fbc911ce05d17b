//===- TrainingLoopRule.cpp - accel-training-loop -------------------------===//
//
// The safety net of the per-loop plans (analysis/TrainingPlan.h): a training loop whose plan
// cannot be made right — its optimizer created inside an outer loop, its model outside the
// function that creates the optimizer, its batches from a source no rule shards, a step
// outside any loop — is declined: the engine applies none of the edits of its transaction
// (the loop's function, its setup function, their helpers and loaders), so nothing is half
// rewritten, and this rule's warning says why and what to write by hand. See
// docs/rules/accel-training-loop.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/DivergentSteps.h"
#include "analysis/IncludedTraining.h"
#include "analysis/SequenceBatches.h"
#include "analysis/SetupFunction.h"
#include "analysis/Statistics.h"
#include "analysis/TrainingLoops.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {

namespace {
/// Inside a loop over this process's share of the batches, in the same function.
AST_MATCHER(Stmt, inShardedLoop) { return insideShardedLoop(&Node, Finder->getASTContext()); }
/// Inside the forward of a model class that a rewritten loop over shared batches trains, or a
/// method its forward calls (a VAE's reparameterize() draws its noise there).
AST_MATCHER(Stmt, inForwardOfSharedModel) {
  ASTContext &Ctx = Finder->getASTContext();
  const auto *Method =
      dyn_cast_or_null<CXXMethodDecl>(enclosingFunction(DynTypedNode::create(Node), Ctx));
  if (!Method || !Method->getDeclName().isIdentifier()) {
    return false;
  }
  if (Method->getName() != "forward") {
    // Called by the class's forward.
    bool CalledByForward = false;
    for (const CXXMethodDecl *Forward : Method->getParent()->methods()) {
      if (!Forward->getDeclName().isIdentifier() || Forward->getName() != "forward" ||
          !Forward->hasBody()) {
        continue;
      }
      forEachStmt(Forward->getBody(), [&](const Stmt *S) {
        const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
        CalledByForward = CalledByForward ||
                          (Call && Call->getMethodDecl() &&
                           Call->getMethodDecl()->getCanonicalDecl() == Method->getCanonicalDecl());
      });
    }
    if (!CalledByForward) {
      return false;
    }
  }
  for (const LoopPlan &Plan : AnalysisContext::of(Ctx).trainingPlans().Loops) {
    if (!Plan.sound() || !Plan.Loader) {
      continue;
    }
    const Stmt *Body = loopBody(Plan.Unit);
    for (const VarDecl *Model : modelsTrainedIn(Body ? Body : Plan.Unit, Ctx)
                                    .value_or(llvm::SmallVector<const VarDecl *, 2>())) {
      const CXXRecordDecl *Class = moduleClassOf(Model->getType());
      if (Class && Class->getCanonicalDecl() == Method->getParent()->getCanonicalDecl()) {
        return true;
      }
    }
  }
  return false;
}

/// A reduction that counts or adds up over this process's rows: `mask.sum()`,
/// `torch::count_nonzero(mask)`.
bool countsOverRows(const Stmt *S) {
  for (llvm::StringRef Name : {"sum", "count_nonzero"}) {
    if (isMethodCall(S, "at::Tensor", Name) || isMethodCall(S, "at::TensorBase", Name)) {
      return true;
    }
    const auto *Call = dyn_cast<CallExpr>(S);
    const auto *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (Callee && Callee->getDeclName().isIdentifier() && Callee->getName() == Name &&
        (qualifiedName(Callee) == "torch::" + Name.str() ||
         qualifiedName(Callee) == "at::" + Name.str())) {
      return true;
    }
  }
  return false;
}

/// A tensor divided by a count or sum over this process's rows (`(err * mask).sum() /
/// mask.sum()`, a mean over the real tokens of a padded batch) on its way to backward: each
/// process divides by its own count, and the average of the processes' gradients weighs them
/// alike, which is not the mean over the whole batch unless every count is the same.
AST_MATCHER(CXXOperatorCallExpr, dividesLossByItsOwnCount) {
  ASTContext &Ctx = Finder->getASTContext();
  if (Node.getOperator() != OO_Slash || Node.getNumArgs() != 2 || !isTensorType(Node.getType())) {
    return false;
  }
  bool Counts = false;
  forEachStmt(Node.getArg(1), [&](const Stmt *S) { Counts = Counts || countsOverRows(S); });
  if (!Counts) {
    return false;
  }
  // Up to the backward it feeds, or to the local it initialises and a backward of the same
  // loop that reads that local.
  const VarDecl *Local = nullptr;
  for (DynTypedNodeList Parents = Ctx.getParents(Node); !Parents.empty();
       Parents = Ctx.getParents(Parents[0])) {
    if (const auto *Call = Parents[0].get<CallExpr>(); Call && isBackwardCall(Call)) {
      return true;
    }
    if ((Local = Parents[0].get<VarDecl>())) {
      break;
    }
    if (Parents[0].get<Stmt>() == nullptr ||
        isa_and_nonnull<CompoundStmt>(Parents[0].get<Stmt>())) {
      return false;
    }
  }
  const auto *Function = Local ? dyn_cast<FunctionDecl>(Local->getDeclContext()) : nullptr;
  bool Feeds = false;
  forEachStmt(Function ? Function->getBody() : nullptr, [&](const Stmt *S) {
    if (Feeds || !isBackwardCall(S)) {
      return;
    }
    forEachStmt(S, [&](const Stmt *Inner) {
      const auto *Ref = dyn_cast<DeclRefExpr>(Inner);
      Feeds = Feeds || (Ref && Ref->getDecl() == Local);
    });
  });
  return Feeds;
}
} // namespace

Rule makeTrainingLoopRule() {
  auto Backward = callExpr(inUserCode(), backwardCall()).bind("call");
  auto Verdict = dynamicFinding("call", [](const MatchResult &Match) {
    Finding Result;
    const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
    const LoopPlan *Plan =
        AnalysisContext::of(*Match.Context).trainingPlans().planOf(Call, *Match.SourceManager);
    if (Plan && !Plan->sound()) {
      // Every backward of the loop reports the same place and text: one warning per loop.
      Result.Kind = Finding::Decline;
      Result.Loc = Plan->ProblemLoc;
      Result.Message = "this training is left as written, with its setup and helpers (a partial "
                       "rewrite would train each process on its own): " +
                       Plan->Problem;
    } else {
      Result.Message = "this training loop can be rewritten whole";
    }
    return Result;
  });
  // Training in a project header is no loop of this file: declined out loud, never passed
  // over in silence.
  auto Headers = dynamicFinding("unit", [](const MatchResult &Match) {
    Finding Result;
    Result.Message = "no included header trains";
    const SourceManager &SM = *Match.SourceManager;
    for (const IncludedTraining &Header : trainingInIncludedHeaders(*Match.Context)) {
      if (Result.Kind != Finding::Decline) {
        Result.Kind = Finding::Decline;
        Result.Loc =
            Header.Include.isValid() ? Header.Include : SM.getLocForStartOfFile(SM.getMainFileID());
        Result.Message = "the training in included headers is left as written, and would run "
                         "unchanged on every process, each on all the data with its own "
                         "model (accel-rewrite edits only the file it is given):";
      } else {
        Result.Message += ";";
      }
      Result.Message +=
          " '" + Header.Header + "' calls backward on line " + std::to_string(Header.Line);
    }
    Result.Message += "; move the training loop into this file, or rewrite it there by hand "
                      "(accelerator.prepare, accelerator.backward, accelerator.step, "
                      "accelerator.prepare_data_loader)";
    return Result;
  });
  // Random numbers drawn for each batch (a GAN's latent vectors, noise added to the input):
  // every process's generator was seeded alike, so each draws the same numbers for its own
  // samples. Said, since nothing here can make them the original's.
  std::vector<std::string> Qualified;
  for (const char *Name : {"randn", "rand", "randint", "randn_like", "rand_like", "randint_like",
                           "normal", "bernoulli", "multinomial", "poisson", "randperm"}) {
    Qualified.push_back(std::string("::torch::") + Name);
    Qualified.push_back(std::string("::at::") + Name);
  }
  const std::vector<llvm::StringRef> Names(Qualified.begin(), Qualified.end());
  auto InPlace = cxxMethodDecl(hasAnyName("uniform_", "normal_", "bernoulli_", "random_",
                                          "exponential_", "geometric_", "cauchy_", "log_normal_"),
                               ofClass(hasName("::at::Tensor")));
  auto Random = callExpr(inUserCode(),
                         anyOf(allOf(forFunction(acceleratorFunction()), inShardedLoop()),
                               inForwardOfSharedModel()),
                         anyOf(callee(functionDecl(hasAnyName(Names))), callee(InPlace)))
                    .bind("random");
  auto SameDraws = makeRule(
      Random, noEdits(),
      warn("random", "random numbers drawn for a batch of a loop over this process's share "
                     "of the batches (in the loop, or in the forward of the model it trains) "
                     "are the same on every process (each process's generator starts from the "
                     "same seed), so the processes use the same draws for different samples: "
                     "the global batch gets fewer distinct draws than the original's, and "
                     "accel verify cannot match it; for draws of its own on each process, pass "
                     "a generator seeded per process, such as "
                     "at::make_generator<at::CPUGeneratorImpl>(seed + "
                     "accelerator.process_index())"));
  auto OwnCount = makeRule(
      cxxOperatorCallExpr(inUserCode(), forFunction(acceleratorFunction()), inShardedLoop(),
                          dividesLossByItsOwnCount())
          .bind("division"),
      noEdits(),
      warn("division",
           "this loss is divided by a count over this process's part of the batch: each "
           "process divides by its own count, and averaging the processes' gradients weighs "
           "them alike, so unless every process counts the same the result is not the "
           "original's mean over the whole batch (nor is the printed loss); to match it, "
           "multiply by accelerator.num_processes() and divide by "
           "accelerator.reduce(<the count>, \"sum\") instead"));
  return applyFirst<Finding>({makeRule(Backward, noEdits(), Verdict), SameDraws, OwnCount,
                              makeRule(translationUnitDecl().bind("unit"), noEdits(), Headers)});
}

} // namespace accel::rewrites
