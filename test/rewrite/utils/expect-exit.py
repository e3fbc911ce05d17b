"""Runs a command and succeeds only if it exits with the given status.

    %expect-exit STATUS COMMAND [ARG...]

lit's `not` only tells zero from non-zero; accel-rewrite's exit statuses each mean something
(docs/accel-rewrite.md), so tests check the exact one. The command's output passes through.
"""
import subprocess
import sys

expected = int(sys.argv[1])
status = subprocess.call(sys.argv[2:])
if status != expected:
    sys.stderr.write(f"expect-exit: {sys.argv[2]} exited with {status}, expected {expected}\n")
    sys.exit(1)
