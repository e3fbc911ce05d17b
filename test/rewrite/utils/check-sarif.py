"""Checks a SARIF log against what GitHub code scanning requires of an upload.

    check-sarif.py LOG.sarif SOURCE_ROOT

SARIF 2.1.0 with one run; a driver with a name and rules (id, name, shortDescription,
fullDescription, help); every result with a known ruleId, a message, a location whose URI is
relative to SRCROOT and names a file under SOURCE_ROOT, a region with start and end line and
column, a partialFingerprints entry, and fixes whose replacements carry deleted regions.
Fingerprints must be unique. Prints what is wrong and exits 1, or prints "ok N results".
"""
import json
import os
import sys

log = json.load(open(sys.argv[1]))
root = sys.argv[2]
problems = []


def need(condition, what):
    if not condition:
        problems.append(what)


need(log.get("version") == "2.1.0", "version is not 2.1.0")
need("sarif-2.1.0" in log.get("$schema", ""), "no SARIF 2.1.0 $schema")
runs = log.get("runs", [])
need(len(runs) == 1, "not exactly one run")
run = runs[0] if runs else {}
driver = run.get("tool", {}).get("driver", {})
need(driver.get("name") == "accel-rewrite", "driver name")
rules = {}
for rule in driver.get("rules", []):
    for key in ("id", "name", "shortDescription", "fullDescription", "help"):
        need(key in rule, f"rule without {key}: {rule.get('id')}")
    need(rule.get("help", {}).get("text"), f"rule {rule.get('id')} has no help text")
    rules[rule.get("id")] = rule
base = run.get("originalUriBaseIds", {}).get("SRCROOT", {}).get("uri", "")
need(base.startswith("file://") and base.endswith("/"), "SRCROOT is not a directory URI")
fingerprints = set()
results = run.get("results", [])
for number, result in enumerate(results):
    where = f"result {number}"
    need(result.get("ruleId") in rules, f"{where}: unknown ruleId {result.get('ruleId')}")
    if "ruleIndex" in result:
        need(driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"], f"{where}: ruleIndex")
    need(result.get("message", {}).get("text"), f"{where}: no message")
    location = result.get("locations", [{}])[0].get("physicalLocation", {})
    artifact = location.get("artifactLocation", {})
    need(artifact.get("uriBaseId") == "SRCROOT", f"{where}: URI not relative to SRCROOT")
    need(not artifact.get("uri", "/").startswith("/"), f"{where}: absolute URI")
    need(os.path.isfile(os.path.join(root, artifact.get("uri", ""))), f"{where}: no such file")
    region = location.get("region", {})
    for key in ("startLine", "startColumn", "endLine", "endColumn"):
        need(isinstance(region.get(key), int) and region[key] >= 1, f"{where}: region {key}")
    fingerprint = result.get("partialFingerprints", {}).get("primaryLocationLineHash")
    need(fingerprint, f"{where}: no partialFingerprints")
    need(fingerprint not in fingerprints, f"{where}: duplicate fingerprint")
    fingerprints.add(fingerprint)
    for fix in result.get("fixes", []):
        for change in fix.get("artifactChanges", []):
            for replacement in change.get("replacements", []):
                need("startLine" in replacement.get("deletedRegion", {}), f"{where}: fix region")
                need("text" in replacement.get("insertedContent", {}), f"{where}: fix text")

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"ok {len(results)} results")
