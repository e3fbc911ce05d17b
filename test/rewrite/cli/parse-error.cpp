// An input with compile errors gets exit status 2, clang's diagnostics, and no output: a
// new -o file is not created, an existing one is left as it was.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %expect-exit 2 %accel-rewrite %s -o %t/out.cpp 2>&1 | FileCheck %s
// RUN: %not ls %t/out.cpp
// RUN: echo previous > %t/out.cpp
// RUN: %expect-exit 2 %accel-rewrite %s -o %t/out.cpp 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=KEPT --input-file=%t/out.cpp
// KEPT: {{^previous$}}
// RUN: ls -a %t | FileCheck %s --check-prefix=LEFT --implicit-check-not=accel-tmp
// LEFT: out.cpp
//
// Printing to stdout writes nothing either.
// RUN: %expect-exit 2 %accel-rewrite %s 2>/dev/null | FileCheck %s --allow-empty --check-prefix=NO-STDOUT
// NO-STDOUT-NOT: {{.}}

int main() {
  return 0 // Missing semicolon.
}
// CHECK: parse-error.cpp:[[@LINE-2]]:11: error: expected ';' after return statement
// CHECK: accel-rewrite: error: {{.*}}parse-error.cpp has compile errors; nothing written for it
