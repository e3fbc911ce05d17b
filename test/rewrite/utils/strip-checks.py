#!/usr/bin/env python3
"""Copies a test file with its FileCheck comments (any "// PREFIX:" comment) blanked, as clang-tidy's test driver does:
the rewritten file then holds no CHECK lines of its own for FileCheck to match, and every
line keeps its number, so [[@LINE]] in CHECK-MESSAGES still points at the code.

usage: strip-checks.py INPUT OUTPUT
"""
import re
import sys

CHECK = re.compile(r"//\s*[A-Z][A-Z0-9_-]*:.*$")

with open(sys.argv[1], encoding="utf-8") as source:
    lines = source.read().split("\n")
with open(sys.argv[2], "w", encoding="utf-8") as target:
    target.write("\n".join(CHECK.sub("//", line) for line in lines))
