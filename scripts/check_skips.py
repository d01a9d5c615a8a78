#!/usr/bin/env python3
"""Lists every skipped test of a run with its reason, and fails when io_uring cases skipped on a
machine that has io_uring.

Reads CTest's JUnit report (`ctest --output-junit FILE`: a GoogleTest GTEST_SKIP and a
SKIP_RETURN_CODE 77 both appear as status "notrun") or GoogleTest's own XML
(`--gtest_output=xml:FILE`, result "skipped"). A skip's reason is the message GTEST_SKIP()
printed, or the last line a 77-test wrote.

An io_uring case that skips where io_uring works is a test that silently stopped testing its
backend, so it fails the run. A skip counts as an io_uring skip when its reason says io_uring is
unavailable, or when it is the `/io_uring` instance of a case whose `/epoll` instance ran (a
reason that holds for both backends, such as RLIMIT_NOFILE or a missing capability, skips both).
Every other skip is listed and allowed. io_uring is probed as the test binaries probe it
(io_uring_queue_init of 8 entries): an io_uring_setup system call.

Usage: scripts/check_skips.py [--step NAME] REPORT.xml...
"""

import argparse
import ctypes
import os
import platform
import re
import sys
import xml.etree.ElementTree as ET

IO_URING_UNAVAILABLE = re.compile(r"io_uring\b[^\n]*\b(unavailable|not available|unsupported)",
                                  re.IGNORECASE)
SYS_IO_URING_SETUP = {"x86_64": 425, "aarch64": 425}


def io_uring_works():
    """(works, why): io_uring_setup(8, {0}) as io_uring_queue_init(8, &ring, 0) calls it."""
    nr = SYS_IO_URING_SETUP.get(platform.machine())
    if nr is None:
        return False, f"no io_uring_setup number known for {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_uint(8), params)
    if fd < 0:
        return False, f"io_uring_setup: {os.strerror(ctypes.get_errno())}"
    os.close(fd)
    return True, "io_uring_setup succeeds"


def gtest_reason(output):
    """The message of GTEST_SKIP(): the lines between 'file:line: Skipped' and '[  SKIPPED ]'."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):
            msg = []
            for rest in lines[i + 1:]:
                if rest.startswith("[  SKIPPED ]"):
                    break
                msg.append(rest.strip())
            return " ".join(m for m in msg if m)
    return None


def read_report(path):
    """[(name, skipped, reason)] of one report, CTest JUnit or GoogleTest XML."""
    root = ET.parse(path).getroot()
    cases = []
    for tc in root.iter("testcase"):
        name = tc.get("name", "")
        classname = tc.get("classname", "")
        if "result" in tc.attrib:  # GoogleTest's XML: suite in classname, case in name
            name = f"{classname}.{name}"
            skipped = tc.get("result") == "skipped"
            node = tc.find("skipped")
            reason = None
            if node is not None:
                reason = (node.get("message") or node.text or "").strip()
                # "file:line\nmessage": keep the message.
                reason = reason.split("\n", 1)[-1].strip()
        else:  # CTest's JUnit; a parameterised case's name ends in "  # GetParam() = ..."
            name = name.split("  # GetParam()", 1)[0]
            skipped = tc.get("status") == "notrun"
            out = tc.findtext("system-out") or ""
            reason = gtest_reason(out)
            if reason is None and skipped:
                tail = [line.strip() for line in out.splitlines() if line.strip()]
                node = tc.find("skipped")
                reason = tail[-1] if tail else (node.get("message") if node is not None else "")
        cases.append((name, skipped, reason or "no reason printed"))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", default="tests", help="the CI step named in the output")
    ap.add_argument("reports", nargs="+")
    args = ap.parse_args()

    cases = []
    for path in args.reports:
        cases.extend(read_report(path))
    ran = {name for name, skipped, _ in cases if not skipped}
    # A skip repeated by several reports (the shuffle step's seeds) is listed once, counted.
    repeats = {}
    for name, skipped, reason in cases:
        if skipped:
            repeats[(name, reason)] = repeats.get((name, reason), 0) + 1
    skips = list(repeats)
    works, why = io_uring_works()

    uring_skips = []
    for name, reason in skips:
        twin_ran = name.endswith("/io_uring") and name[: -len("io_uring")] + "epoll" in ran
        if IO_URING_UNAVAILABLE.search(reason) or twin_ran:
            uring_skips.append(name)

    print(f"skips ({args.step}): {len(skips)} tests skipped, {len(ran)} ran; io_uring here: "
          f"{'yes' if works else 'no'} ({why})")
    for name, reason in sorted(skips):
        mark = "  [io_uring]" if name in uring_skips else ""
        times = f" (x{repeats[(name, reason)]})" if repeats[(name, reason)] > 1 else ""
        print(f"  {name}: {reason}{times}{mark}")
    if works and uring_skips:
        print(f"skips ({args.step}): FAILED: {len(uring_skips)} io_uring cases skipped on a "
              "machine where io_uring works")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
