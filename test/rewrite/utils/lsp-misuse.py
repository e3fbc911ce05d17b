"""Sends accel-rewrite --lsp what a broken client might, then a real request.

    lsp-misuse.py ACCEL_REWRITE FILE

Malformed JSON, a message without a method, a change and a code action for a document never
opened, an unknown method, a close of an unknown document: the server must answer the
requests it can (an error for the unknown method), stay up, and then serve the document
normally, then re-analyse it after an edit. Prints one line per reply or notification it
saw, and the server's log line for each analysis.
"""
import json
import subprocess
import sys


def frame(payload):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


uri = "file://" + sys.argv[2]
text = open(sys.argv[2]).read()
messages = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
    b"{this is not json",
    {"jsonrpc": "2.0", "id": 2},
    {"jsonrpc": "2.0", "method": "textDocument/didChange",
     "params": {"textDocument": {"uri": uri + ".unopened", "version": 2},
                "contentChanges": [{"text": "int x;"}]}},
    {"jsonrpc": "2.0", "id": 3, "method": "textDocument/codeAction",
     "params": {"textDocument": {"uri": uri + ".unopened"},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}},
                "context": {"diagnostics": []}}},
    {"jsonrpc": "2.0", "id": 4, "method": "no/such/method", "params": {}},
    {"jsonrpc": "2.0", "method": "textDocument/didClose",
     "params": {"textDocument": {"uri": uri + ".unopened"}}},
    {"jsonrpc": "2.0", "method": "textDocument/didOpen",
     "params": {"textDocument": {"uri": uri, "languageId": "cpp", "version": 1, "text": text}}},
    {"jsonrpc": "2.0", "id": 5, "method": "textDocument/codeAction",
     "params": {"textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}},
                "context": {"diagnostics": []}}},
    # An edit: analysed again with the preamble the server keeps in memory.
    {"jsonrpc": "2.0", "method": "textDocument/didChange",
     "params": {"textDocument": {"uri": uri, "version": 2},
                "contentChanges": [{"text": text + "// An edit.\n"}]}},
    {"jsonrpc": "2.0", "id": 7, "method": "shutdown"},
    {"jsonrpc": "2.0", "method": "exit"},
]
server = subprocess.run([sys.argv[1], "--lsp"], input=b"".join(frame(m) for m in messages),
                        capture_output=True, timeout=300)
output = server.stdout
while output:
    header, _, rest = output.partition(b"\r\n\r\n")
    length = int(header.split(b":")[1])
    message, output = json.loads(rest[:length]), rest[length:]
    if "id" in message:
        outcome = "error " + str(message["error"]["code"]) if "error" in message else (
            f"{len(message['result'])} results" if isinstance(message.get("result"), list)
            else "ok")
        print(f"reply {message['id']}: {outcome}")
    else:
        print(f"{message['method']}: {len(message['params']['diagnostics'])} diagnostics")
for line in server.stderr.decode().splitlines():
    if "analysed in" in line:
        print("log: " + line[line.index(sys.argv[2]):])
print(f"exit {server.returncode}")
