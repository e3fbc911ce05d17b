//===- UnifiedDiff.cpp - Showing a rewrite as a patch ---------------------===//
//
// Lines are matched with Myers' O((N+M)D) shortest edit script. Rewrites change a few
// places in a file, so D is small; each round's frontier is kept (O(D^2) in all) to walk
// the path back.
//
//===----------------------------------------------------------------------===//
#include "UnifiedDiff.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace accel::tool {
namespace {

/// Lines keep their '\n', so a last line without one differs from the same line with one.
std::vector<llvm::StringRef> splitLines(llvm::StringRef Text) {
  std::vector<llvm::StringRef> Lines;
  while (!Text.empty()) {
    size_t End = Text.find('\n');
    End = End == llvm::StringRef::npos ? Text.size() : End + 1;
    Lines.push_back(Text.take_front(End));
    Text = Text.drop_front(End);
  }
  return Lines;
}

enum class Op : std::uint8_t { Keep, Delete, Insert };

/// One step of the edit script; Old and New are the line indices it starts from.
struct Step {
  Op Kind;
  long Old;
  long New;
};

std::vector<Step> editScript(const std::vector<llvm::StringRef> &A,
                             const std::vector<llvm::StringRef> &B) {
  const long N = static_cast<long>(A.size()), M = static_cast<long>(B.size()), Max = N + M;
  // Furthest X reached on diagonal K = X - Y, stored at K + Max + 1.
  std::vector<long> V(2 * Max + 3, 0);
  auto At = [&](long K) -> long & { return V[K + Max + 1]; };
  // Diagonal K moves down (insert) from K + 1 or right (delete) from K - 1, whichever got
  // further; the ends -D and D have only one choice.
  auto FromAbove = [](long K, long D, auto Furthest) {
    return K == -D || (K != D && Furthest(K - 1) < Furthest(K + 1));
  };

  // Trace[D] holds V before round D for K in [-D - 1, D + 1].
  std::vector<std::vector<long>> Trace;
  bool Done = false;
  for (long D = 0; D <= Max && !Done; ++D) {
    Trace.emplace_back(&At(-D - 1), &At(D + 1) + 1);
    for (long K = -D; K <= D && !Done; K += 2) {
      long X = FromAbove(K, D, At) ? At(K + 1) : At(K - 1) + 1;
      long Y = X - K;
      while (X < N && Y < M && A[X] == B[Y]) {
        ++X, ++Y;
      }
      At(K) = X;
      Done = X >= N && Y >= M;
    }
  }

  std::vector<Step> Script;
  long X = N, Y = M;
  for (long D = static_cast<long>(Trace.size()) - 1; D >= 0; --D) {
    auto Before = [&](long K) { return Trace[D][K + D + 1]; };
    long K = X - Y;
    long PrevK = FromAbove(K, D, Before) ? K + 1 : K - 1;
    long PrevX = Before(PrevK), PrevY = PrevX - PrevK;
    while (X > PrevX && Y > PrevY) {
      --X, --Y;
      Script.push_back({Op::Keep, X, Y});
    }
    if (D > 0) {
      Script.push_back({X == PrevX ? Op::Insert : Op::Delete, PrevX, PrevY});
    }
    X = PrevX, Y = PrevY;
  }
  std::reverse(Script.begin(), Script.end());
  return Script;
}

// "start,count" as diff -u writes it: an empty range names the line before it.
void printRange(llvm::raw_ostream &OS, long Start, long Count) {
  OS << (Count == 0 ? Start : Start + 1);
  if (Count != 1) {
    OS << ',' << Count;
  }
}

void printLine(llvm::raw_ostream &OS, char Mark, llvm::StringRef Line) {
  OS << Mark << Line;
  if (!Line.ends_with("\n")) {
    OS << "\n\\ No newline at end of file\n";
  }
}

} // namespace

std::string unifiedDiff(llvm::StringRef OldName, llvm::StringRef NewName, llvm::StringRef Old,
                        llvm::StringRef New, unsigned Context) {
  if (Old == New) {
    return "";
  }
  std::vector<llvm::StringRef> A = splitLines(Old), B = splitLines(New);
  std::vector<Step> Script = editScript(A, B);
  auto IsKeep = [&](size_t I) { return Script[I].Kind == Op::Keep; };

  std::string Diff;
  llvm::raw_string_ostream OS(Diff);
  OS << "--- " << OldName << "\n+++ " << NewName << "\n";
  size_t Size = Script.size(), Next = 0;
  while (true) {
    size_t Change = Next;
    while (Change < Size && IsKeep(Change)) {
      ++Change;
    }
    if (Change == Size) {
      break;
    }
    // A hunk runs from Context lines before its first change to Context lines after its
    // last, taking in later changes whose context would touch or overlap it.
    size_t Begin = std::max(Next, Change >= Context ? Change - Context : 0);
    size_t End = Change;
    while (true) {
      while (End < Size && !IsKeep(End)) {
        ++End;
      }
      size_t Following = End;
      while (Following < Size && IsKeep(Following)) {
        ++Following;
      }
      if (Following < Size && Following - End <= 2 * size_t(Context)) {
        End = Following;
        continue;
      }
      End = std::min(End + Context, Size);
      break;
    }

    long OldCount = 0, NewCount = 0;
    for (size_t I = Begin; I < End; ++I) {
      OldCount += Script[I].Kind != Op::Insert;
      NewCount += Script[I].Kind != Op::Delete;
    }
    OS << "@@ -";
    printRange(OS, Script[Begin].Old, OldCount);
    OS << " +";
    printRange(OS, Script[Begin].New, NewCount);
    OS << " @@\n";
    for (size_t I = Begin; I < End; ++I) {
      const Step &S = Script[I];
      if (S.Kind == Op::Insert) {
        printLine(OS, '+', B[S.New]);
      } else {
        printLine(OS, S.Kind == Op::Keep ? ' ' : '-', A[S.Old]);
      }
    }
    Next = End;
  }
  return Diff;
}

} // namespace accel::tool
