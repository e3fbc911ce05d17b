//===- HeapSetup.h - malloc set up for clang's parse ------------*- C++ -*-===//
//
// A cold run parses ~5,000 LibTorch headers: ~0.6 GB of AST in small blocks, walked through
// pointers. With glibc's thresholds raised (blocks up to 32 MiB from the heap) and the heap
// backed by transparent huge pages, that parse needs far fewer TLB refills and page faults
// (docs/design.md, "accel-rewrite's heap").
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace accel::tool {

/// Sets malloc up, once, first thing in main (before threads start and while the heap is
/// small); ACCEL_REWRITE_MALLOC_TUNING=false, the user's GLIBC_TUNABLES glibc.malloc.* or
/// MALLOC_*_, or a malloc other than glibc's leave it alone. Returns what was done, for -v.
std::string setUpHeapForParsing();

} // namespace accel::tool
