//===- TrainingLoops.h - Where a program trains -----------------*- C++ -*-===//
//
// The analysis of training loops: which data loader a loop trains on (in its function or in
// a function it is passed to), which loop runs one training step per iteration, and the
// function a statement is in.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/StmtCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace accel::rewrites {

/// The variable a range-for iterates (`for (auto& b : *loader)` gives `loader`).
const clang::VarDecl *iteratedVar(const clang::CXXForRangeStmt *Loop);
/// The call that initialises a local loader variable: torch::data::make_data_loader (the
/// stateless overloads), or a function of the program's own that returns such a loader (a
/// factory, `auto loader = make_loader(dataset, 64);`); null for other variables.
const clang::CallExpr *makeDataLoaderInit(const clang::VarDecl *Var);
/// The loader a loop walks with its iterators, `for (auto it = loader->begin(); it !=
/// loader->end(); ++it)`, or `auto it = loader->begin(); while (it != loader->end())` (the
/// iterator declared auto, so that a prepared loader's fits); null for any other statement.
const clang::VarDecl *walkedLoader(const clang::Stmt *Loop);
/// Whether a loader's initialising call is a factory of the program's own, whose loader is
/// prepared whole (`accelerator.prepare_data_loader(make_loader(...))`).
bool isLoaderFactoryCall(const clang::CallExpr *Call);
/// A statement that calls a function of this file whose code (or whose callees' code, to
/// depth 4) calls backward: `train(model, optimizer, loader);` trains as much as the loop it
/// holds.
bool callsTraining(const clang::Stmt *S, clang::ASTContext &Ctx, int Depth = 0);
/// S calls backward, or callsTraining.
bool trains(const clang::Stmt *S, clang::ASTContext &Ctx);
/// A make_data_loader variable that a range-for with a backward call in its body iterates,
/// in its function or in a function it is passed to whose parameter accepts the sharded
/// loader: the rule accel-data-loader shards it.
bool isTrainingLoader(const clang::VarDecl *Loader, clang::ASTContext &Ctx);
/// A call in the loader's function that passes it (or *it) to another function.
struct LoaderHandOff {
  const clang::FunctionDecl *Callee = nullptr; // the instantiation, for a template
  /// The callee's range-for iterates the parameter, or a function it passes the parameter on
  /// to does (`fit(loader)` calling `train_epoch(loader)`), whose parameter accepts it too.
  bool Iterates = false;
  bool Trains = false; // ... with a backward call in its body
  /// The parameter's type is deduced (`Loader &`, `auto &`): the sharded loader fits it.
  bool AcceptsShardedLoader = false;
};
llvm::SmallVector<LoaderHandOff, 2> loaderHandOffs(const clang::VarDecl *Loader,
                                                   clang::ASTContext &Ctx, int Depth = 0);
/// Why accel-data-loader cannot rewrite a make_data_loader variable (its type is spelled out,
/// a sampler object with explicit template arguments), or "" when it can.
std::string shardingProblem(const clang::VarDecl *Loader);
/// A loader variable whose batches are this process's shard: one made by make_data_loader
/// that accel-data-loader shards, one made by accelerator.prepare_data_loader, or a parameter
/// that a call in this file passes such a loader to.
bool isShardedLoader(const clang::VarDecl *Var, clang::ASTContext &Ctx, int Depth = 0);
/// A loader parameter that one call passes a sharded loader and another a loader every
/// process sees whole (an evaluation helper given the training and the test loader): what it
/// adds up is a share in one call and the whole in the other.
bool receivesUnshardedLoaderToo(const clang::VarDecl *Var, clang::ASTContext &Ctx);
/// A training-step range-for over batches the program made itself: a std::vector (by name)
/// of tensors, Examples, pairs or tuples of tensors, or vectors of tensors, that
/// accel-data-loader shards with accelerator.prepare_batches; or one already iterating
/// accelerator.prepare_batches(...).
bool isBatchListLoop(const clang::CXXForRangeStmt *Loop, clang::ASTContext &Ctx);
/// Such a loop over the vector itself, not yet through prepare_batches.
bool isUnpreparedBatchListLoop(const clang::CXXForRangeStmt *Loop, clang::ASTContext &Ctx);
/// The loop variable of a range-for over a training loader.
bool isTrainingBatch(const clang::VarDecl *Var, clang::ASTContext &Ctx);

/// The function whose body a statement or declaration is in (lambdas count as functions).
const clang::FunctionDecl *enclosingFunction(const clang::DynTypedNode &Node,
                                             clang::ASTContext &Ctx);
/// The innermost loop (for, range-for, while, do) around Node inside its function, or null.
const clang::Stmt *innermostLoop(const clang::DynTypedNode &Node, clang::ASTContext &Ctx);
/// A loop that runs one training step per iteration: a backward call has it as its innermost
/// loop.
bool isTrainingStepLoop(const clang::Stmt *Loop, clang::ASTContext &Ctx);
/// Whether a function makes an optimizer of its own (a local holding one by value): it sets
/// training up.
bool createsOptimizer(const clang::FunctionDecl *Function);
/// A function that is one training step: it calls backward outside any loop (in a template,
/// in an instantiation), e.g. `train_step(model, optimizer, batch)` called once per batch, and
/// makes no optimizer of its own (a function that does has a straight-line step instead).
bool isTrainingStepFunction(const clang::FunctionDecl *Function);
/// A call inside a training step: in a loop that runs one per iteration, outside loops in
/// a helper that is one training step (the caller checks the helper gets the accelerator), or
/// in a straight-line step (TrainingPlan.h).
bool isInTrainingStep(const clang::CallExpr *Call, clang::ASTContext &Ctx);
/// A training step's braced body, in user code of a function where generated code may name
/// `accelerator`, bound as "body": the body of a training-step loop (the loop bound as
/// "loop"), or the body of a helper that is a training-step function and gets the accelerator
/// as a parameter.
clang::ast_matchers::StatementMatcher trainingStepBody();

} // namespace accel::rewrites
