#!/usr/bin/env python3
"""Checks that every rule in rewrites/rules/Rules.def has its source, its lit test and its doc
page under the same name, and that nothing is left over for a rule that is not listed:

    rule-consistency.py SOURCE_ROOT [--list-rules-output FILE]

With --list-rules-output (what `accel-rewrite --list-rules` printed), also checks that the
registry the tool was built with lists the same rules in the same order. Prints one line per
problem and exits 1 when there is any; prints "ok N rules" otherwise.
"""
import argparse
import glob
import os
import re
import sys

ENTRY = re.compile(r'^ACCEL_RULE\("(accel-[a-z0-9-]+)",\s*(make(\w+)Rule),', re.M)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--list-rules-output")
    args = parser.parse_args()
    root = args.root
    with open(os.path.join(root, "rewrites", "rules", "Rules.def"), encoding="utf-8") as f:
        entries = ENTRY.findall(f.read())
    problems = []
    if not entries:
        problems.append("Rules.def lists no rule")
    names = [name for name, _, _ in entries]
    for name, builder, stem in entries:
        source = os.path.join(root, "rewrites", "rules", f"{stem}Rule.cpp")
        test = os.path.join(root, "test", "rewrite", f"{name}.cpp")
        doc = os.path.join(root, "docs", "rules", f"{name}.md")
        if not os.path.isfile(source):
            problems.append(f"{name}: no source {os.path.relpath(source, root)}")
        elif not re.search(rf"\bRule {builder}\(\)", open(source, encoding="utf-8").read()):
            problems.append(f"{name}: {os.path.relpath(source, root)} does not define {builder}()")
        if not os.path.isfile(test):
            problems.append(f"{name}: no lit test {os.path.relpath(test, root)}")
        elif not open(test, encoding="utf-8").readline().startswith(f"// {name}:"):
            problems.append(f"{name}: {os.path.relpath(test, root)} does not start '// {name}:'")
        if not os.path.isfile(doc):
            problems.append(f"{name}: no page {os.path.relpath(doc, root)}")
        else:
            text = open(doc, encoding="utf-8").read()
            if not text.startswith(f"# {name}\n"):
                problems.append(f"{name}: {os.path.relpath(doc, root)} is not titled '# {name}'")
            if f"test/rewrite/{name}.cpp" not in text:
                problems.append(f"{name}: {os.path.relpath(doc, root)} does not name its test")
    stems = {stem for _, _, stem in entries}
    for path in sorted(glob.glob(os.path.join(root, "rewrites", "rules", "*Rule.cpp"))):
        if os.path.basename(path)[: -len("Rule.cpp")] not in stems:
            problems.append(f"{os.path.relpath(path, root)}: no rule in Rules.def builds from it")
    for pattern in (("test", "rewrite", "accel-*.cpp"), ("docs", "rules", "accel-*.md")):
        for path in sorted(glob.glob(os.path.join(root, *pattern))):
            stem = os.path.splitext(os.path.basename(path))[0]
            if stem not in names:
                problems.append(f"{os.path.relpath(path, root)}: {stem} is not in Rules.def")
    if args.list_rules_output:
        with open(args.list_rules_output, encoding="utf-8") as f:
            listed = re.findall(r"^\s*(accel-[a-z0-9-]+)", f.read(), re.M)
        if listed != names:
            problems.append(f"accel-rewrite --list-rules lists {listed}, Rules.def {names}")
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"ok {len(names)} rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
