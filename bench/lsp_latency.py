#!/usr/bin/env python3
"""How long accel-rewrite --lsp takes to publish diagnostics, on open and after edits.

Opens a training program in the server as an editor would (its text in didOpen), waits for
the diagnostics, then makes --edits edits (each changes one line of the program, as typing
would) and times each round trip from didChange to publishDiagnostics. The open runs with
an empty preamble cache (--cache-dir in a fresh directory) unless --warm.

    python3 bench/lsp_latency.py [--build build] [--file test/corpus/gan_adamw.cpp] [--edits 5]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Client:
    def __init__(self, command):
        self.server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)

    def send(self, message):
        body = json.dumps(message).encode()
        self.server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.server.stdin.flush()

    def receive(self):
        length = None
        while True:
            line = self.server.stdout.readline()
            if not line:
                sys.exit("lsp_latency: the server closed the connection:\n"
                         + self.server.stderr.read().decode()[-3000:])
            line = line.strip()
            if not line:
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.server.stdout.read(length))

    def wait_for(self, method):
        while True:
            message = self.receive()
            if message.get("method") == method:
                return message


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--file", default=os.path.join(ROOT, "test", "corpus", "gan_adamw.cpp"))
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--warm", action="store_true", help="keep the default cache directory")
    opts = parser.parse_args()
    command = [os.path.join(opts.build, "bin", "accel-rewrite"), "--lsp", "-p", opts.build]
    cache = None
    if not opts.warm:
        cache = tempfile.mkdtemp(prefix="accel-lsp-latency-")
        command += ["--cache-dir", cache]
    client = Client(command)
    path = os.path.abspath(opts.file)
    uri = "file://" + path
    text = open(path).read()
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"capabilities": {}, "rootUri": "file://" + ROOT}})
    client.receive()
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    start = time.perf_counter()
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                 "params": {"textDocument": {"uri": uri, "languageId": "cpp", "version": 1,
                                             "text": text}}})
    opened = client.wait_for("textDocument/publishDiagnostics")
    timings = [("open", time.perf_counter() - start, len(opened["params"]["diagnostics"]))]
    lines = text.split("\n")
    last = max(i for i, line in enumerate(lines) if line.strip() == "}")
    for edit in range(opts.edits):
        # A new statement at the end of main, as if typed.
        lines.insert(last, f"  // edit {edit}")
        start = time.perf_counter()
        client.send({"jsonrpc": "2.0", "method": "textDocument/didChange",
                     "params": {"textDocument": {"uri": uri, "version": edit + 2},
                                "contentChanges": [{"text": "\n".join(lines)}]}})
        changed = client.wait_for("textDocument/publishDiagnostics")
        timings.append((f"edit {edit + 1}", time.perf_counter() - start,
                        len(changed["params"]["diagnostics"])))
    client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    client.receive()
    client.send({"jsonrpc": "2.0", "method": "exit"})
    client.server.stdin.close()
    client.server.wait(timeout=60)
    for name, seconds, count in timings:
        print(f"{name:8} {seconds:6.2f} s  {count} diagnostics")
    edits = [seconds for name, seconds, _ in timings[1:]]
    if edits:
        print(f"edits: mean {sum(edits) / len(edits):.2f} s, max {max(edits):.2f} s")
    if cache:
        subprocess.run(["rm", "-rf", cache])


if __name__ == "__main__":
    main()
