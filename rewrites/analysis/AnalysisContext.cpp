//===- AnalysisContext.cpp - What the rules know about one file -----------===//
#include "analysis/AnalysisContext.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/TrainingPlan.h"

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

const AcceleratorParameterAnalysis &AnalysisContext::acceleratorParameters() {
  if (!Parameters) {
    if (ComputingParameters) {
      llvm::report_fatal_error("accel-rewrite: the accelerator-parameter analysis needs itself");
    }
    ComputingParameters = true;
    Parameters = analyzeAcceleratorParameters(Ctx);
    ComputingParameters = false;
  }
  return *Parameters;
}

const SetupInfo &AnalysisContext::setup(const clang::FunctionDecl *Function) {
  auto &Entry = Setups[Function];
  if (!Entry) {
    Entry = std::make_unique<SetupInfo>(analyzeSetup(Function, Ctx));
  }
  return *Entry;
}

const TrainingPlans &AnalysisContext::trainingPlans() {
  if (!Plans) {
    if (ComputingPlans) {
      llvm::report_fatal_error("accel-rewrite: the training-loop plans need themselves");
    }
    ComputingPlans = true;
    Plans = planTrainingLoops(Ctx);
    ComputingPlans = false;
  }
  return *Plans;
}

} // namespace accel::rewrites
