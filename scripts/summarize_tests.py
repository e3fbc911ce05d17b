"""Prints one summary line per test harness from their JUnit XML files, then the total.

Exits 1 when any test failed or errored, or when a harness ran no test (or left no report).
"""
import sys
import xml.etree.ElementTree as ET


def count(path):
    """Returns (passed, failed, skipped) for one JUnit XML report."""
    root = ET.parse(path).getroot()
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main(args):
    ok = True
    totals = [0, 0, 0]
    for arg in args:
        name, path = arg.split("=", 1)
        try:
            passed, failed, skipped = count(path)
        except (OSError, ET.ParseError) as error:
            print(f"{name}: no report ({error})")
            ok = False
            continue
        print(f"{name}: {passed} passed, {failed} failed, {skipped} skipped")
        if passed + failed == 0:
            print(f"{name}: ran no test")
            ok = False
        ok = ok and failed == 0
        totals = [t + n for t, n in zip(totals, (passed, failed, skipped))]
    print(f"total: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
