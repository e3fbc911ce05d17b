"""Starts commands at the same moment and succeeds only if every one does.

    %run-concurrently COMMAND [ARG...] --- COMMAND [ARG...] [--- ...]

lit's shell has no `&`; preamble-cache-damage.test races two accel-rewrite runs on an empty cache.
Each command's output passes through.
"""
import subprocess
import sys

commands = [[]]
for arg in sys.argv[1:]:
    if arg == "---":
        commands.append([])
    else:
        commands[-1].append(arg)
running = [subprocess.Popen(command) for command in commands if command]
statuses = [process.wait() for process in running]
for command, status in zip(commands, statuses):
    if status != 0:
        sys.stderr.write(f"run-concurrently: {command[0]} exited with {status}\n")
sys.exit(1 if any(statuses) else 0)
