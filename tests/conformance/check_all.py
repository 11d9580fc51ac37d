"""What both validators share: read {"kind": [object, ...]} as JSON on stdin, check each object, report every failure."""
import json
import sys


def check_all(check):
    data = json.load(sys.stdin)
    failures = 0
    checked = 0
    for kind, objects in data.items():
        for i, obj in enumerate(objects):
            checked += 1
            try:
                check(kind, obj)
            except Exception as err:  # noqa: BLE001 - every failure is reported, none stops the rest
                failures += 1
                print(f"{kind}[{i}]: {str(err).splitlines()[0]} :: {' '.join(str(err).split())[:600]}")
    print(f"checked {checked} objects, {failures} failed", file=sys.stderr)
    sys.exit(1 if failures else 0)
