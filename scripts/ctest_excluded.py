#!/usr/bin/env python3
"""Prints what a CTest selection leaves out of a build's tests, and why; fails on an exclusion
no reason covers, so that a test added later cannot drop out of a CI step unannounced.

The selection is CTest's own (`ctest -N` with the step's -L/-E/-R arguments; a step that runs
CTest more than once gives each run's arguments after its own `--`, and the union counts),
compared with every test of the build. Excluded tests are grouped by the binary and suite that run them (a
GoogleTest suite's cases together, as "<binary> <suite>"; `<target>_NOT_BUILT` as
"<target> (not built)"; any other test by its name). Each group needs a reason:
`--why 'REGEX=reason'`, REGEX matched in full against the group (`test_bus_nats nats_backend`,
`test_bus_outbox (not built)`, `nats_server_start`), or
`--why 'label:LABEL=reason'` for every test that carries LABEL. The first that matches wins.

Usage: scripts/ctest_excluded.py BUILD_DIR --step NAME [--why 'REGEX=reason']... -- CTEST_ARGS...
           [-- CTEST_ARGS...]
"""

import argparse
import json
import os
import re
import subprocess
import sys


def tests(build, ctest_args):
    """{name: (group, labels)} of the tests `ctest ARGS` would run."""
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1", *ctest_args],
                         check=True, capture_output=True, text=True).stdout
    found = {}
    for t in json.loads(out)["tests"]:
        name = t["name"]
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels = props.get("LABELS", [])
        command = t.get("command") or []
        if name.endswith("_NOT_BUILT"):
            group = name[: -len("_NOT_BUILT")] + " (not built)"
        elif len(command) > 1 and command[1].startswith("--gtest_filter="):
            group = f"{os.path.basename(command[0])} {name.split('.', 1)[0]}"
        else:
            group = name
        found[name] = (group, labels)
    return found


def main():
    argv = sys.argv[1:]
    runs = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
        runs.append([])
        for a in rest:
            if a == "--":
                runs.append([])
            else:
                runs[-1].append(a)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--step", required=True)
    ap.add_argument("--why", action="append", default=[], metavar="REGEX=reason")
    args = ap.parse_args(argv)

    reasons = []
    for w in args.why:
        pattern, sep, reason = w.partition("=")
        if not sep or not reason:
            ap.error(f"--why needs REGEX=reason, not {w!r}")
        reasons.append((pattern, reason))

    everything = tests(args.build, [])
    selected = {}
    for run in runs or [[]]:
        selected.update(tests(args.build, run))
    groups = {}
    for name, (group, labels) in everything.items():
        if name in selected:
            continue
        g = groups.setdefault(group, {"count": 0, "labels": set()})
        g["count"] += 1
        g["labels"].update(labels)

    unexplained = []
    by_reason = {}
    for group in sorted(groups):
        g = groups[group]
        why = None
        for pattern, reason in reasons:
            if pattern.startswith("label:"):
                if pattern[len("label:"):] in g["labels"]:
                    why = reason
                    break
            elif re.fullmatch(pattern, group):
                why = reason
                break
        cases = f" ({g['count']} tests)" if g["count"] > 1 else ""
        by_reason.setdefault(why, []).append(group + cases)
        if why is None:
            unexplained.append(group)
    print(f"excluded ({args.step}): {sum(g['count'] for g in groups.values())} of "
          f"{len(everything)} tests, {len(selected)} selected")
    for why, members in by_reason.items():
        print(f"  {', '.join(members)}:")
        print(f"      {why or 'NO REASON GIVEN'}")
    if unexplained:
        print(f"excluded ({args.step}): FAILED: no reason given for {', '.join(unexplained)} "
              "(run it in this step or add a --why in .ci/run)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
