"""Sum the JUnit XML reports of `make test`'s pytest sessions into one closing line: `N passed, N failed`."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main() -> int:
    passed = failed = skipped = 0
    for path in sorted(Path(sys.argv[1]).glob("*.xml")):
        for suite in ET.parse(path).getroot().iter("testsuite"):
            tests, errors = int(suite.get("tests", 0)), int(suite.get("errors", 0))
            fails, skips = int(suite.get("failures", 0)), int(suite.get("skipped", 0))
            passed += tests - errors - fails - skips
            failed += errors + fails
            skipped += skips
    print(f"all sessions: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
