//===- ResourceDir.h - Finding clang's builtin headers ----------*- C++ -*-===//
//
// Clang looks for its builtin headers (stddef.h, stdarg.h, the intrinsics) in a resource
// directory it derives from its own executable's path: <bin>/../lib/clang/<major>. For a
// tool that lives elsewhere (a build tree, /usr/local/bin) that guess is wrong, and
// parsing fails deep inside the C++ library with "'stddef.h' file not found".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace accel::tool {

/// Returns the resource directory to parse with: Override when given, otherwise the first
/// of (1) the directory clang derives from this executable's path, (2) the directory of
/// the clang this tool was built against (fixed at configure time), that contains
/// include/stddef.h. Fails naming every directory tried when none does.
llvm::Expected<std::string> findResourceDir(llvm::StringRef Override, const char *Argv0,
                                            void *MainAddr);

} // namespace accel::tool
