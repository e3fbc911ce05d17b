"""Prints a fenced code block of a Markdown page, so that tests run what the docs show.

    doc-blocks.py PAGE.md LANGUAGE [INDEX]        the INDEX-th (0-based) ```LANGUAGE block
    doc-blocks.py PAGE.md yaml INDEX --run-steps  the `run:` commands of that workflow, one
                                                  per line, in order

Fails when the page has no such block, so a test notices when the docs change shape.
"""
import re
import sys

page, language = sys.argv[1], sys.argv[2]
index = int(sys.argv[3]) if len(sys.argv) > 3 else 0
blocks = re.findall(r"^```" + re.escape(language) + r"\n(.*?)^```", open(page).read(),
                    re.MULTILINE | re.DOTALL)
if index >= len(blocks):
    sys.exit(f"doc-blocks: {page} has no ```{language} block number {index}")
block = blocks[index]
if "--run-steps" in sys.argv:
    steps = re.findall(r"^\s*(?:-\s+)?run:\s*(.+)$", block, re.MULTILINE)
    if not steps:
        sys.exit(f"doc-blocks: the ```{language} block {index} of {page} has no run: steps")
    block = "\n".join(steps) + "\n"
sys.stdout.write(block)
