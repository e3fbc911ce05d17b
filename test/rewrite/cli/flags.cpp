// Compile flags come from the flags after `--`, else from -p's compile_commands.json, else
// the defaults (-std=c++17 and LibTorch's headers). This file parses only as strict C++17.
// RUN: rm -rf %t && mkdir -p %t/build
//
// Defaults.
// RUN: %accel-rewrite %s -o %t/defaults.cpp
// RUN: diff %s %t/defaults.cpp
//
// Flags after `--` replace the defaults.
// RUN: %accel-rewrite %s -o %t/dashdash.cpp -- %torch_flags
// RUN: diff %s %t/dashdash.cpp
// RUN: %expect-exit 2 %accel-rewrite %s -- -std=c++20 2>&1 | FileCheck %s --check-prefix=CXX20
//
// A build directory's database (which says -std=c++20) replaces them too.
// RUN: sed -e 's|@DIR@|%/t|g' -e 's|@FILE@|%/s|g' %S/Inputs/compile_commands.json.in \
// RUN:   > %t/build/compile_commands.json
// RUN: %expect-exit 2 %accel-rewrite -p %t/build %s 2>&1 | FileCheck %s --check-prefix=CXX20
// CXX20: error: static assertion failed{{.*}}strict C++17
//
// A build's clang precompiled header is dropped (it may come from another clang, or not be
// built yet); the header it was made from is still included.
// RUN: mkdir -p %t/pch-build
// RUN: sed -e 's|@DIR@|%/t/pch-build|g' -e 's|@FILE@|%/s|g' -e 's|@HEADER@|%/S/Inputs/pch-header.h|g' \
// RUN:   -e 's|@FLAGS@|%torch_flags|g' %S/Inputs/compile_commands_pch.json.in \
// RUN:   > %t/pch-build/compile_commands.json
// RUN: %accel-rewrite -p %t/pch-build %s -o %t/pch.cpp
// RUN: diff %s %t/pch.cpp
//
// RUN: %expect-exit 1 %accel-rewrite -p %t/nowhere %s 2>&1 | FileCheck %s --check-prefix=NO-DB
// NO-DB: accel-rewrite: error: cannot use -p {{.*}}nowhere:
// RUN: %expect-exit 1 %accel-rewrite -p %t/build %s -- -std=c++17 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BOTH
// BOTH: accel-rewrite: error: give either -p or compiler flags after --, not both

static_assert(__cplusplus == 201703L, "expected strict C++17");
#ifndef __STRICT_ANSI__
#error expected strict C++17, not GNU C++17
#endif

#if defined(EXPECT_PCH_HEADER) && !defined(FLAGS_PCH_HEADER_INCLUDED)
#error the header the precompiled header was made from must still be included
#endif

// A small LibTorch header (c10's DeviceType): the tool refuses a file that includes none. The
// flags without LibTorch's paths below must fail on the checks above, not on this.
#if __has_include(<c10/core/DeviceType.h>)
#include <c10/core/DeviceType.h>
#endif
