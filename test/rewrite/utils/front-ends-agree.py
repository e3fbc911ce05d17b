"""Runs every front end of the rule engine on the same files and fails unless they agree.

    front-ends-agree.py ACCEL_REWRITE CLANG_TIDY TIDY_PLUGIN FILE... -- FLAGS...

For each FILE: `accel-rewrite --check --format=json`, the plain rewrite's warnings on stderr,
`accel-rewrite --lsp` (diagnostics after didOpen, quick fixes from codeAction) and clang-tidy
with the accel-* checks (--export-fixes) must report the same findings: rule, line, column,
message, and edits that make the same text of the file. FLAGS go to clang-tidy; accel-rewrite
uses its defaults, which are the same LibTorch flags, and its server the compile_flags.txt the
test puts beside the files (the same again). Prints one summary line
per file.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml


def offset_of(text, line, column):
    """The byte offset of a 1-based line and column (UTF-8, as clang counts)."""
    data = text.encode()
    start = 0
    for _ in range(line - 1):
        start = data.index(b"\n", start) + 1
    return start + column - 1


def line_column(text, offset):
    before = text.encode()[:offset]
    return before.count(b"\n") + 1, offset - (before.rfind(b"\n") + 1) + 1


TEXT = {}  # the file being compared, for effect()


def effect(edits):
    """What a finding's edits make of the file: front ends may spell one edit differently
    (clang-tidy's plugin writes a removal as a replacement that keeps the next character)."""
    data = TEXT["current"].encode()
    for offset, length, text in sorted(edits, reverse=True):
        data = data[:offset] + text.encode() + data[offset + length:]
    return data.decode() if edits else None


def finding(rule, line, column, message, edits):
    return (rule, line, column, message, effect(edits))


def from_check(tool, path):
    run = subprocess.run([tool, "--check", "--format=json", path], capture_output=True, text=True)
    if run.returncode not in (0, 1):
        sys.exit(f"accel-rewrite --check {path} failed ({run.returncode}):\n{run.stderr}")
    return sorted(
        finding(f["rule"], f["line"], f["column"], f["message"],
                [(e["offset"], e["length"], e["text"]) for e in f["fix"]])
        for f in json.loads(run.stdout)["findings"])


def warnings_of_rewrite(tool, path, directory):
    run = subprocess.run([tool, path, "-o", os.path.join(directory, "rewritten.cpp")],
                         capture_output=True, text=True)
    # 6: written, with a training loop declined (accel-training-loop's warning says why).
    if run.returncode not in (0, 6):
        sys.exit(f"accel-rewrite {path} failed ({run.returncode}):\n{run.stderr}")
    pattern = re.compile(r"^(.*):(\d+):(\d+): warning: (.*) \[(accel-[a-z-]+)\]$")
    found = []
    for line in run.stderr.splitlines():
        match = pattern.match(line)
        if match and match.group(1) == path:
            found.append((match.group(5), int(match.group(2)), int(match.group(3)),
                          match.group(4)))
    return sorted(found)


def frame(payload):
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def from_lsp(tool, path, text):
    uri = "file://" + path
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen",
         "params": {"textDocument": {"uri": uri, "languageId": "cpp", "version": 1,
                                     "text": text}}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction",
         "params": {"textDocument": {"uri": uri},
                    "range": {"start": {"line": 0, "character": 0},
                              "end": {"line": text.count("\n") + 1, "character": 0}},
                    "context": {"diagnostics": []}}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    server = subprocess.run([tool, "--lsp"], input=b"".join(frame(m) for m in messages),
                            capture_output=True, timeout=600)
    output, diagnostics, actions = server.stdout, None, None
    while output:
        header, _, rest = output.partition(b"\r\n\r\n")
        length = int(header.split(b":")[1])
        message, output = json.loads(rest[:length]), rest[length:]
        if message.get("method") == "textDocument/publishDiagnostics":
            diagnostics = message["params"]["diagnostics"]
        elif message.get("id") == 2:
            actions = message["result"]
    if diagnostics is None or actions is None:
        sys.exit(f"accel-rewrite --lsp gave no diagnostics or code actions for {path}:\n"
                 + server.stderr.decode(errors="replace")[-2000:])

    def key(diagnostic):
        start = diagnostic["range"]["start"]
        rule = diagnostic["category"]
        message = diagnostic["message"]
        suffix = f" [{rule}]"
        if message.endswith(suffix):
            message = message[: -len(suffix)]
        return rule, start["line"] + 1, start["character"] + 1, message

    edits = {}
    for action in actions:
        if not action.get("diagnostics"):
            continue  # "apply all": not one finding's
        changes = []
        for change in action["edit"]["changes"][uri]:
            start, end = change["range"]["start"], change["range"]["end"]
            begin = offset_of(text, start["line"] + 1, start["character"] + 1)
            changes.append((begin, offset_of(text, end["line"] + 1, end["character"] + 1) - begin,
                            change["newText"]))
        edits[key(action["diagnostics"][0])] = changes
    return sorted(finding(*key(d), edits.get(key(d), [])) for d in diagnostics)


def from_clang_tidy(tidy, plugin, path, text, flags, directory):
    fixes = os.path.join(directory, "fixes.yaml")
    if os.path.exists(fixes):
        os.remove(fixes)
    run = subprocess.run([tidy, f"--load={plugin}", "--checks=-*,accel-*",
                          f"--export-fixes={fixes}", path, "--"] + flags,
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"clang-tidy {path} failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    if not os.path.exists(fixes):
        return []
    with open(fixes) as stream:
        document = yaml.safe_load(stream) or {}
    found = []
    for diagnostic in document.get("Diagnostics", []):
        message = diagnostic["DiagnosticMessage"]
        line, column = line_column(text, message["FileOffset"])
        edits = [(r["Offset"], r["Length"], r["ReplacementText"])
                 for r in message.get("Replacements", [])]
        found.append(finding(diagnostic["DiagnosticName"], line, column, message["Message"],
                             edits))
    return sorted(found)


def describe(findings):
    return "\n".join(f"    {f[:4]}" for f in findings) or "    (none)"


def main():
    split = sys.argv.index("--")
    tool, tidy, plugin, *files = sys.argv[1:split]
    flags = sys.argv[split + 1:]
    failed = False
    with tempfile.TemporaryDirectory() as directory:
        for path in files:
            path = os.path.abspath(path)
            text = open(path, encoding="utf-8").read()
            TEXT["current"] = text
            check = from_check(tool, path)
            sides = {
                "accel-rewrite --lsp": from_lsp(tool, path, text),
                "clang-tidy --load": from_clang_tidy(tidy, plugin, path, text, flags, directory),
            }
            for name, found in sides.items():
                if found != check:
                    failed = True
                    only_check = [f for f in check if f not in found]
                    only_other = [f for f in found if f not in check]
                    print(f"{path}: {name} disagrees with accel-rewrite --check\n"
                          f"  only --check:\n{describe(only_check)}\n"
                          f"  only {name}:\n{describe(only_other)}")
                    for f in only_check + only_other:
                        print(f"  {f[:4]} makes:\n{f[4]}")
            manual = sorted(f[:4] for f in check if not f[4])
            plain = warnings_of_rewrite(tool, path, directory)
            if plain != manual:
                failed = True
                print(f"{path}: the rewrite's warnings disagree with --check's manual findings\n"
                      f"  --check: {manual}\n  rewrite: {plain}")
            rewrites = sum(1 for f in check if f[4])
            print(f"{os.path.basename(path)}: {rewrites} rewrites, {len(manual)} warnings, "
                  f"{'agree' if not failed else 'DISAGREE'}")
    sys.exit(1 if failed else 0)


main()
