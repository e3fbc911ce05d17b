//===- ResourceDir.cpp - Finding clang's builtin headers ------------------===//
#include "ResourceDir.h"

#include "clang/Basic/Version.h"
#if CLANG_VERSION_MAJOR >= 22
#include "clang/Options/OptionUtils.h"
#else
#include "clang/Driver/Driver.h"
#endif
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace accel::tool {
namespace {

// The same answer clang itself would give if it were this executable.
std::string besideExecutable(const char *Argv0, void *MainAddr) {
#if CLANG_VERSION_MAJOR >= 22
  return clang::GetResourcesPath(Argv0, MainAddr);
#else
  return clang::driver::Driver::GetResourcesPath(llvm::sys::fs::getMainExecutable(Argv0, MainAddr));
#endif
}

// A resource directory is usable when clang would find its builtin headers in it.
bool hasBuiltinHeaders(llvm::StringRef Dir) {
  llvm::SmallString<256> Header(Dir);
  llvm::sys::path::append(Header, "include", "stddef.h");
  return llvm::sys::fs::exists(Header);
}

} // namespace

llvm::Expected<std::string> findResourceDir(llvm::StringRef Override, const char *Argv0,
                                            void *MainAddr) {
  llvm::SmallVector<std::string, 2> Candidates;
  if (!Override.empty()) {
    Candidates.push_back(Override.str()); // Explicit: never fall back behind the user's back.
  } else {
    Candidates = {besideExecutable(Argv0, MainAddr), ACCEL_DEFAULT_RESOURCE_DIR};
  }

  std::string Tried;
  for (const std::string &Dir : Candidates) {
    if (hasBuiltinHeaders(Dir)) {
      return Dir;
    }
    Tried += "\n  " + Dir;
  }
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "clang's resource directory (builtin headers) not found: no include/stddef.h in" + Tried +
          "\nPass --resource-dir=DIR, where DIR is what `clang-" CLANG_VERSION_MAJOR_STRING
          " -print-resource-dir` prints for the clang " CLANG_VERSION_STRING
          " accel-rewrite was built with.");
}

} // namespace accel::tool
