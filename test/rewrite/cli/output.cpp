// Where the result goes: stdout by default, -o FILE, -i in place, or --diff. There are no
// rules yet, so every output equals the input.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %accel-rewrite %s > %t/stdout.cpp
// RUN: diff %s %t/stdout.cpp
// RUN: %accel-rewrite %s -o %t/out.cpp
// RUN: diff %s %t/out.cpp
//
// An existing -o file is replaced whole.
// RUN: echo 'previous contents' > %t/out.cpp
// RUN: %accel-rewrite %s -o %t/out.cpp
// RUN: diff %s %t/out.cpp
//
// --diff prints nothing for an unchanged file.
// RUN: %accel-rewrite --diff %s | FileCheck %s --allow-empty --check-prefix=NO-DIFF
// NO-DIFF-NOT: {{.}}
//
// -i leaves unchanged files alone, time stamp included, and takes several inputs.
// RUN: cp %s %t/a.cpp && cp %s %t/b.cpp
// RUN: touch -d '2001-01-01 00:00' %t/a.cpp %t/b.cpp
// RUN: %accel-rewrite -i %t/a.cpp %t/b.cpp
// RUN: ls -l --time-style=long-iso %t/a.cpp %t/b.cpp | FileCheck %s --check-prefix=UNTOUCHED
// UNTOUCHED: 2001-01-01 00:00 {{.*}}a.cpp
// UNTOUCHED: 2001-01-01 00:00 {{.*}}b.cpp
//
// Several inputs need -i or --diff.
// RUN: %expect-exit 1 %accel-rewrite %t/a.cpp %t/b.cpp 2>&1 | FileCheck %s --check-prefix=SEVERAL
// SEVERAL: accel-rewrite: error: several input files need -i or --diff

// A small LibTorch header (c10's DeviceType): the tool refuses a file that includes none.
#include <c10/core/DeviceType.h>

int square(int X) { return X * X; }
