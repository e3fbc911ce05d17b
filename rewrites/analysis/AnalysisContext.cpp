//===- AnalysisContext.cpp - What the rules know about one file -----------===//
#include "analysis/AnalysisContext.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/EntryFunction.h"
#include "analysis/FileWrites.h"
#include "analysis/TrainingPlan.h"

#include "clang/AST/ParentMapContext.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

namespace accel::rewrites {
namespace {
/// The owner installed on this thread (AnalysisContext::Scope), or null.
thread_local AnalysisContext::Owner *Installed = nullptr;
} // namespace

AnalysisContext::AnalysisContext(clang::ASTContext &Ctx)
    : Ctx(Ctx), Unit(Ctx.getTranslationUnitDecl()) {}
AnalysisContext::~AnalysisContext() = default;

AnalysisContext &AnalysisContext::of(clang::ASTContext &Ctx) {
  if (!Installed) {
    llvm::report_fatal_error("accel-rewrite: an analysis ran without an owner of the analyses "
                             "of its translation unit (a front end must match through a "
                             "RuleRunner)");
  }
  return Installed->analysesFor(Ctx);
}

AnalysisContext::Scope::Scope(Owner &Owner) : Previous(Installed) { Installed = &Owner; }
AnalysisContext::Scope::~Scope() { Installed = Previous; }

AnalysisContext &AnalysisContext::OneUnit::analysesFor(clang::ASTContext &Ctx) {
  // A new unit (a front end such as clang-tidy may reuse an ASTContext's address): analyses
  // never outlive the AST they were computed on.
  if (!Current || &Current->Ctx != &Ctx || Current->Unit != Ctx.getTranslationUnitDecl()) {
    Current = std::make_unique<AnalysisContext>(Ctx);
  }
  return *Current;
}

namespace {
/// Each analysis reads parents in one way, whoever asks for it first. clang's parent map
/// follows the traversal kind of the matcher being run: accel-file-write matches under
/// traverse(TK_IgnoreUnlessSpelledInSource), where a parent skips implicit casts and
/// constructions. An analysis first computed from inside such a matcher would otherwise find
/// other parents (a counted loop's cuts went unseen) and keep that result for every later use.
/// Most read the AST as it is (TK_AsIs); the file-write analysis, written for the statements
/// as spelled, reads them that way.
class ParentsAs {
public:
  ParentsAs(clang::ASTContext &Ctx, clang::TraversalKind Kind)
      : Parents(Ctx.getParentMapContext()), Previous(Parents.getTraversalKind()) {
    Parents.setTraversalKind(Kind);
  }
  ~ParentsAs() { Parents.setTraversalKind(Previous); }
  ParentsAs(const ParentsAs &) = delete;
  ParentsAs &operator=(const ParentsAs &) = delete;

private:
  clang::ParentMapContext &Parents;
  clang::TraversalKind Previous;
};

/// Computes an analysis on first use. One that needs itself while it is being computed is a
/// bug, reported as such rather than a stack overflow.
template <typename Result, typename Compute>
const Result &once(clang::ASTContext &Ctx, std::unique_ptr<Result> &Slot, bool &Computing,
                   const char *What, Compute &&Make, clang::TraversalKind Kind = clang::TK_AsIs) {
  if (!Slot) {
    if (Computing) {
      llvm::report_fatal_error(llvm::Twine("accel-rewrite: ") + What + " need themselves");
    }
    ParentsAs Reading(Ctx, Kind);
    Computing = true;
    Slot = Make();
    Computing = false;
  }
  return *Slot;
}
} // namespace

const CallGraph &AnalysisContext::callGraph() {
  return once(Ctx, Calls, ComputingCalls, "the call-graph analyses",
              [&] { return analyzeCallGraph(Ctx); });
}

const AcceleratorParameterAnalysis &AnalysisContext::acceleratorParameters() {
  return once(Ctx, Parameters, ComputingParameters, "the accelerator-parameter analyses",
              [&] { return analyzeAcceleratorParameters(Ctx); });
}

const EntryHosting &AnalysisContext::entryHosting() {
  return once(Ctx, Entry, ComputingEntry, "the entry-function analyses",
              [&] { return analyzeEntryHosting(Ctx); });
}

const SetupInfo &AnalysisContext::setup(const clang::FunctionDecl *Function) {
  if (auto Found = Setups.find(Function); Found != Setups.end()) {
    return *Found->second;
  }
  // Computed before the entry exists: the map may grow meanwhile.
  ParentsAs Reading(Ctx, clang::TK_AsIs);
  auto Computed = std::make_unique<SetupInfo>(analyzeSetup(Function, Ctx));
  return *(Setups[Function] = std::move(Computed));
}

const CountedBatchLoop &AnalysisContext::countedBatchLoop(const clang::ForStmt *Loop) {
  if (auto Found = CountedLoops.find(Loop); Found != CountedLoops.end()) {
    return *Found->second;
  }
  ParentsAs Reading(Ctx, clang::TK_AsIs);
  auto Computed = std::make_unique<CountedBatchLoop>(analyzeCountedBatchLoop(Loop, Ctx));
  return *(CountedLoops[Loop] = std::move(Computed));
}

const MemberTraining &AnalysisContext::memberTraining(const clang::FunctionDecl *Function) {
  if (auto Found = Members.find(Function); Found != Members.end()) {
    return *Found->second;
  }
  ParentsAs Reading(Ctx, clang::TK_AsIs);
  auto Computed = std::make_unique<MemberTraining>(analyzeMemberTraining(Function));
  return *(Members[Function] = std::move(Computed));
}

const TrainingPlans &AnalysisContext::trainingPlans() {
  return once(Ctx, Plans, ComputingPlans, "the training-loop plans",
              [&] { return planTrainingLoops(Ctx); });
}

const FileWriteGuards &AnalysisContext::fileWrites() {
  return once(
      Ctx, Writes, ComputingWrites, "the file-write analyses",
      [&] { return analyzeFileWrites(Ctx); }, clang::TK_IgnoreUnlessSpelledInSource);
}

} // namespace accel::rewrites
