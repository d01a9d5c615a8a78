#!/usr/bin/env python3
"""Checks that every loom model still quotes the C++ it models.

A model (tests/*.rs) names the files it follows in its header, one `//! Follows: PATH` line
each (PATH from the repository root), and anchors its steps to them with quotes in `//`
comments (not in the `//!` header):
`@"C++ text"`, or `@NAME"C++ text"` where NAME is the last component of one of those paths (to
pick a file when several are followed). A quote matches when the file contains it, whitespace
compared as single spaces (clang-format may rewrap a statement). The check fails when a quote
is no longer in its file (the code changed under the model: update the model, then the quote),
when a model follows no file or a missing one, and when a comment cites a line number
(`file.cpp:123`, `// :123`): line numbers go stale with every edit above them.

Usage: tools/loom/check_anchors.py [--verbose]      (exit 1 on any failure)
       tools/loom/check_anchors.py --self-test      (a model with a stale quote must fail)
"""

import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FOLLOWS = re.compile(r"^//!\s*Follows:\s*(\S+)\s*$", re.MULTILINE)
ANCHOR = re.compile(r'@([A-Za-z0-9_.]*)"([^"]+)"')
LINE_REF = re.compile(r"//.*?(\b[\w/]+\.(?:hpp|cpp|h)\s*:\s*\d+|//\s*:\d+)")


def squash(text):
    return re.sub(r"\s+", " ", text).strip()


def line_of(text, squashed_quote):
    """1-based line in `text` where the (whitespace-squashed) quote starts."""
    words = squashed_quote.split(" ")
    pattern = r"\s+".join(re.escape(w) for w in words)
    m = re.search(pattern, text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def check_model(path, root, verbose):
    errors = []
    rel = os.path.relpath(path, root)
    src = open(path, encoding="utf-8").read()
    followed = FOLLOWS.findall(src)
    if "loom::model" not in src and "loom::model::Builder" not in src:
        return errors, 0
    if not followed:
        return [f"{rel}: no `//! Follows: PATH` line: the model names no C++ file"], 0
    files = {}
    for f in followed:
        full = os.path.join(root, f)
        if not os.path.isfile(full):
            errors.append(f"{rel}: follows {f}, which does not exist")
            continue
        text = open(full, encoding="utf-8").read()
        files[f] = (text, squash(text))
    count = 0
    for lineno, line in enumerate(src.splitlines(), 1):
        if "//" not in line or line.lstrip().startswith("//!"):
            continue  # no comment, or the model's header (which may show the syntax)
        comment = line[line.index("//"):]
        m = LINE_REF.search(comment)
        if m:
            errors.append(f"{rel}:{lineno}: cites a line number ({m.group(1).strip()}); quote "
                          'the code instead: @"..."')
        for name, quote in ANCHOR.findall(comment):
            count += 1
            q = squash(quote)
            candidates = [f for f in files if not name or os.path.basename(f) == name]
            if name and not candidates:
                errors.append(f"{rel}:{lineno}: @{name}: not a file this model follows")
                continue
            hits = [f for f in candidates if q in files[f][1]]
            if not hits:
                where = name or " or ".join(os.path.basename(f) for f in candidates)
                errors.append(f'{rel}:{lineno}: "{quote}" is no longer in {where}')
            elif verbose:
                f = hits[0]
                print(f"  {rel}:{lineno} -> {f}:{line_of(files[f][0], q)}")
    if count == 0:
        errors.append(f"{rel}: no anchors (@\"...\"): nothing ties the model to the code")
    return errors, count


def run(root, models_dir, verbose):
    errors = []
    total = 0
    models = sorted(f for f in os.listdir(models_dir) if f.endswith(".rs"))
    for f in models:
        e, n = check_model(os.path.join(models_dir, f), root, verbose)
        errors += e
        total += n
    return errors, total, len(models)


def self_test():
    """A stale quote and a line number must both be reported."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "src"))
        os.makedirs(os.path.join(d, "models"))
        with open(os.path.join(d, "src", "a.cpp"), "w") as f:
            f.write("int x = 1;\nvoid f() {\n    x.store(2,\n            relaxed);\n}\n")
        with open(os.path.join(d, "models", "m.rs"), "w") as f:
            f.write('//! Follows: src/a.cpp\nfn t() { loom::model(|| {}); }\n'
                    '// @"x.store(2, relaxed);"\n// @a.cpp"int x = 1;"\n')
        errors, total, _ = run(d, os.path.join(d, "models"), False)
        assert not errors and total == 2, errors
        with open(os.path.join(d, "models", "m.rs"), "a") as f:
            f.write('// @"x.store(3, relaxed);"\n// a.cpp:3\n')
        errors, _, _ = run(d, os.path.join(d, "models"), False)
        assert len(errors) == 2, errors
        assert "no longer in a.cpp" in errors[0] and "line number" in errors[1], errors
    print("check_anchors: self-test passed (a stale quote and a line number are reported)")


def main():
    if "--self-test" in sys.argv:
        self_test()
        return 0
    errors, total, models = run(ROOT, os.path.join(HERE, "tests"), "--verbose" in sys.argv)
    for e in errors:
        print(f"check_anchors: {e}")
    print(f"check_anchors: {models} models, {total} quotes, {len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
