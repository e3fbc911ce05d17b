"""Re-indents a 2-space-indented C++ file: every 2 leading spaces become UNIT.

    reindent.py UNIT < IN > OUT        UNIT: a number of spaces, or "tab"

Only the leading spaces of each line change, so a rewrite that keeps the user's layout gives
the same result on both indentations, re-indented.
"""
import sys

unit = "\t" if sys.argv[1] == "tab" else " " * int(sys.argv[1])
for line in sys.stdin.read().splitlines():
    stripped = line.lstrip(" ")
    depth, odd = divmod(len(line) - len(stripped), 2)
    sys.stdout.write(unit * depth + " " * odd + stripped + "\n")
