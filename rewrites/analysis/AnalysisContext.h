//===- AnalysisContext.h - What the rules know about one file ---*- C++ -*-===//
//
// The analyses several rules share (which helpers get the accelerator, what each setup
// function creates, the plan of each training loop) are computed once per translation unit,
// on first use, and owned by an AnalysisContext. The RuleRunner creates one for each
// translation unit it matches and drops it with the unit: while the runner's matchers run
// and its matches are evaluated, it is installed as the thread's Owner
// (AnalysisContext::Scope), and the analyses find the unit's context with
// AnalysisContext::of(Ctx). Nothing is shared between translation units or threads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "analysis/CountedBatchLoops.h"
#include "analysis/MemberTraining.h"
#include "analysis/SetupFunction.h"

#include "clang/AST/ASTContext.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>

namespace accel::rewrites {

struct AcceleratorParameterAnalysis;
struct CallGraph;
struct EntryHosting;
struct FileWriteGuards;
struct TrainingPlans;

class AnalysisContext {
public:
  explicit AnalysisContext(clang::ASTContext &Ctx);
  ~AnalysisContext();
  AnalysisContext(const AnalysisContext &) = delete;
  AnalysisContext &operator=(const AnalysisContext &) = delete;

  /// Who makes and keeps the context of a translation unit (the RuleRunner; a test).
  class Owner {
  public:
    /// The context of Ctx's unit, made on first use; a new unit gets a new one.
    virtual AnalysisContext &analysesFor(clang::ASTContext &Ctx) = 0;

  protected:
    ~Owner() = default;
  };

  /// Installs an owner for the current thread while it lives (the runner while it matches).
  class Scope {
  public:
    explicit Scope(Owner &Installed);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Owner *Previous;
  };

  /// The context of Ctx's unit, from the installed owner. None installed is a bug of the
  /// front end (it matched without a RuleRunner): a fatal error, never a silent
  /// recomputation.
  static AnalysisContext &of(clang::ASTContext &Ctx);

  /// An owner of the analyses of one unit at a time (what the RuleRunner and tests use).
  class OneUnit : public Owner {
  public:
    AnalysisContext &analysesFor(clang::ASTContext &Ctx) override;
    /// Drops the analyses (the unit is done).
    void reset() { Current.reset(); }

  private:
    std::unique_ptr<AnalysisContext> Current;
  };

  clang::ASTContext &astContext() const { return Ctx; }

  /// Which helpers get the accelerator parameter (analysis/AcceleratorParameter.h).
  /// Who calls what in the main file (analysis/CallGraph.h).
  const CallGraph &callGraph();
  const AcceleratorParameterAnalysis &acceleratorParameters();
  /// True while acceleratorParameters() is being computed: a question it asks that leads back
  /// to it (is a loader's function given an accelerator?) must be answered without it.
  bool computingAcceleratorParameters() const { return ComputingParameters; }
  /// Whether main declares the Accelerator for the setup functions it calls
  /// (analysis/EntryFunction.h).
  const EntryHosting &entryHosting();
  /// What a setup function creates and where prepare goes (analysis/SetupFunction.h).
  const SetupInfo &setup(const clang::FunctionDecl *Function);
  /// What a method prepares of its class's members (analysis/MemberTraining.h).
  const MemberTraining &memberTraining(const clang::FunctionDecl *Function);
  /// What a for-loop is as a source of batches (analysis/CountedBatchLoops.h).
  const CountedBatchLoop &countedBatchLoop(const clang::ForStmt *Loop);
  /// The plan of every training loop of the main file (analysis/TrainingPlan.h).
  const TrainingPlans &trainingPlans();
  /// Which statement runs each file write on the main process only (analysis/FileWrites.h).
  const FileWriteGuards &fileWrites();

private:
  clang::ASTContext &Ctx;
  const clang::TranslationUnitDecl *Unit;
  std::unique_ptr<CallGraph> Calls;
  std::unique_ptr<AcceleratorParameterAnalysis> Parameters;
  llvm::DenseMap<const clang::FunctionDecl *, std::unique_ptr<SetupInfo>> Setups;
  llvm::DenseMap<const clang::FunctionDecl *, std::unique_ptr<MemberTraining>> Members;
  llvm::DenseMap<const clang::ForStmt *, std::unique_ptr<CountedBatchLoop>> CountedLoops;
  std::unique_ptr<TrainingPlans> Plans;
  std::unique_ptr<EntryHosting> Entry;
  std::unique_ptr<FileWriteGuards> Writes;
  /// Set while an analysis is being computed: one that needs itself is a bug.
  bool ComputingCalls = false, ComputingParameters = false, ComputingPlans = false,
       ComputingEntry = false, ComputingWrites = false;
};

} // namespace accel::rewrites
