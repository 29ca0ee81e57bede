#!/usr/bin/env python3
"""The closing note of `make test`: every skipped test with the reason it printed, then one line
counting passed, failed and skipped tests (ctest itself counts a skip as passed).

  test_summary.py JUNIT_XML        (written by ctest --output-junit)

A GoogleTest skip's reason is the text GTEST_SKIP() printed (after "file:line: Skipped"); another
test's is its "SKIPPED: ..." line, else its last line of output.
"""
import re
import sys
import xml.etree.ElementTree as ET


def skip_reason(output):
    lines = [l.strip() for l in output.splitlines()]
    for i, line in enumerate(lines):
        if re.search(r":\d+: Skipped$", line):
            reason = []
            for l in lines[i + 1 :]:
                if l.startswith("[  SKIPPED ]") or l.startswith("[       OK ]"):
                    break
                if l:
                    reason.append(l)
            if reason:
                return " ".join(reason)
    for line in lines:
        m = re.match(r"SKIP(?:PED)?: (.*)", line)
        if m:
            return m.group(1)
    rest = [l for l in lines if l]
    return rest[-1] if rest else "(no reason printed)"


def main():
    try:
        suite = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test summary: cannot read {sys.argv[1]}: {e}")
        return 1
    passed, failed, skipped = 0, 0, []
    for case in suite.iter("testcase"):
        status = case.get("status")
        if status == "run":
            passed += 1
        elif status in ("notrun", "disabled"):
            out = case.findtext("system-out") or ""
            skipped.append((case.get("name"), skip_reason(out)))
        else:
            failed += 1
    if skipped:
        print(f"skipped tests ({len(skipped)}):")
        for name, reason in skipped:
            print(f"  {name}: {reason}")
    print(f"tests: {passed} passed, {failed} failed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
