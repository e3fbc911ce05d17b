//===- PreambleCache.h - LibTorch's headers parsed once, kept on disk -*- C++ -*-===//
//
// The #include block at the top of a training program (its preamble, in clang's words) is
// what costs: <torch/torch.h> is ~12 s of parsing. The cache builds it once into a
// precompiled header, keeps it in a directory shared by every run (and in memory for the
// language server), and hands it to clang for each parse of a file with the same preamble.
// docs/design.md ("The preamble cache") gives the reasons behind the key and the format.
//
//===----------------------------------------------------------------------------===//
#pragma once

#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Lex/Lexer.h"
#include "clang/Serialization/PCHContainerOperations.h"
#include "llvm/ADT/IntrusiveRefCntPtr.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/VirtualFileSystem.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace accel::tool {

/// A header the preamble read, and what it held then.
struct PreambleDependency {
  std::string Path; // absolute
  std::string Digest;
  uint64_t Size = 0;
};

/// One built preamble: the PCH, the file clang built it from, and what it depends on.
struct Preamble {
  std::string Key;
  /// The entry's bytes (mapped from disk, or read into memory): the whole entry when it was
  /// loaded, the PCH alone when this process built it; Pch points into it.
  std::unique_ptr<llvm::MemoryBuffer> Storage;
  llvm::StringRef Pch;
  /// The (virtual) main file the PCH was built from and its text: clang looks it up when it
  /// loads the PCH, so the parse that uses it must see it.
  std::string BuiltFrom;
  std::string BuiltFromText;
  std::vector<PreambleDependency> Dependencies;
};

/// Where a parse's preamble came from, for --verbose and the --check summary.
enum class PreambleSource { None, Memory, Disk, Built };

class PreambleCache {
public:
  /// What the entries of a directory may hold together by default: about 20 entries of
  /// <torch/torch.h>.
  static constexpr uint64_t DefaultSizeLimit = uint64_t(2) << 30;

  /// Directory holds the entries; empty keeps them in memory only (the language server
  /// under --no-cache), built through a temporary file. When a new entry makes the entries
  /// hold more than SizeLimit bytes, the least recently used others are removed.
  explicit PreambleCache(std::string Directory, uint64_t SizeLimit = DefaultSizeLimit);

  /// $XDG_CACHE_HOME/accel/preambles, else ~/.cache/accel/preambles; empty when neither
  /// variable is set.
  static std::string defaultDirectory();

  /// The preamble for parsing MainText (the main file of Invocation, whose preamble spans
  /// Bounds) through FS: reused from memory or disk when still valid, built otherwise.
  /// nullptr when the file has no preamble or it cannot be built (the caller then parses
  /// without one, so clang reports what failed). Note says what happened, in words.
  std::shared_ptr<const Preamble>
  get(const clang::CompilerInvocation &Invocation, llvm::StringRef MainText,
      clang::PreambleBounds Bounds, llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS,
      std::shared_ptr<clang::PCHContainerOperations> PCHContainerOps, PreambleSource &Source,
      std::string &Note);

  const std::string &directory() const { return Directory; }

  /// Hands Preamble to the parse of Invocation's main file: clang skips the main file's
  /// first Bounds.Size bytes and loads the PCH instead. Returns the file system the parse
  /// must use (FS with the PCH and the file it was built from laid over it).
  static llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem>
  use(const Preamble &Built, clang::PreambleBounds Bounds, clang::CompilerInvocation &Invocation,
      llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS);

private:
  /// One key's preamble; its mutex is held while it is loaded or built, so that the
  /// threads of -j that need it wait for one build instead of starting their own.
  struct Slot {
    std::mutex Busy;
    std::shared_ptr<const Preamble> Loaded;
  };

  std::shared_ptr<const Preamble> build(const clang::CompilerInvocation &Invocation,
                                        llvm::StringRef Key, llvm::StringRef PreambleText,
                                        llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> FS,
                                        std::shared_ptr<clang::PCHContainerOperations> Ops,
                                        std::string &Note);
  void removeOldEntries(llvm::StringRef Written);

  std::string Directory;
  uint64_t SizeLimit;
  std::mutex SlotsMutex;
  std::map<std::string, std::unique_ptr<Slot>> Slots;
};

} // namespace accel::tool
