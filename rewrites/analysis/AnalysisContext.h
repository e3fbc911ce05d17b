//===- AnalysisContext.h - What the rules know about one file ---*- C++ -*-===//
//
// The analyses several rules share (which helpers get the accelerator, what each setup
// function creates, the plan of each training loop) are computed once per translation unit,
// on first use, and owned by an AnalysisContext. The RuleRunner creates one for each
// translation unit it matches and drops it with the unit; while a rule's match is evaluated,
// the runner installs it (AnalysisContext::Scope), and the analyses find it with
// AnalysisContext::of(Ctx). Nothing is shared between translation units or threads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "analysis/SetupFunction.h"

#include "clang/AST/ASTContext.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>

namespace accel::rewrites {

struct AcceleratorParameterAnalysis;
struct TrainingPlans;

class AnalysisContext {
public:
  explicit AnalysisContext(clang::ASTContext &Ctx);
  ~AnalysisContext();
  AnalysisContext(const AnalysisContext &) = delete;
  AnalysisContext &operator=(const AnalysisContext &) = delete;

  /// The context installed for Ctx's translation unit. A missing one is a bug of the front
  /// end (it matched without a RuleRunner or a Scope): a fatal error, never a silent
  /// recomputation.
  static AnalysisContext &of(clang::ASTContext &Ctx);

  /// Installs a context for the current thread while it lives (the runner around each
  /// match; tests around direct calls of the analyses).
  class Scope {
  public:
    explicit Scope(AnalysisContext &Installed);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    AnalysisContext *Previous;
  };

  clang::ASTContext &astContext() const { return Ctx; }
  /// The unit the analyses were made for (a new one may reuse the old one's ASTContext).
  const clang::TranslationUnitDecl *translationUnit() const { return Unit; }

  /// Which helpers get the accelerator parameter (analysis/AcceleratorParameter.h).
  const AcceleratorParameterAnalysis &acceleratorParameters();
  /// What a setup function creates and where prepare goes (analysis/SetupFunction.h).
  const SetupInfo &setup(const clang::FunctionDecl *Function);
  /// The plan of every training loop of the main file (analysis/TrainingPlan.h).
  const TrainingPlans &trainingPlans();

private:
  clang::ASTContext &Ctx;
  const clang::TranslationUnitDecl *Unit;
  std::unique_ptr<AcceleratorParameterAnalysis> Parameters;
  llvm::DenseMap<const clang::FunctionDecl *, std::unique_ptr<SetupInfo>> Setups;
  std::unique_ptr<TrainingPlans> Plans;
  /// Set while an analysis is being computed: one that needs itself is a bug.
  bool ComputingParameters = false, ComputingPlans = false;
};

} // namespace accel::rewrites
