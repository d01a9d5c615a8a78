#!/usr/bin/env bash
# The mutation test of the loom models: built with the feature "mutant", each model carries a
# known-broken variant of the protocol it follows (MUTANT in each file), and every model test
# must then fail (an assertion, or a deadlock loom reports). A model that still passes with its
# protocol broken proves nothing about the real one. Each test runs alone: loom may abort the
# process after reporting a deadlock, which would hide the other tests of that file.
# Usage: tools/loom/mutants.sh   (LOOM_MAX_PREEMPTIONS as for the models; CI uses 3)
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p target/mutants
cargo test --release --locked --features mutant --no-run 2>target/mutants/build.log || {
    tail -n 30 target/mutants/build.log
    exit 1
}
total=0
survivors=()
for file in tests/*.rs; do
    model=$(basename "$file" .rs)
    for t in $(cargo test --release --locked --features mutant --test "$model" -q -- --list 2>/dev/null |
        sed -n 's/: test$//p'); do
        total=$((total + 1))
        log=target/mutants/$model.$t.log
        if cargo test --release --locked --features mutant --test "$model" -q -- --exact "$t" \
            >"$log" 2>&1; then
            echo "  mutant $model::$t: PASSES (log: tools/loom/$log)"
            survivors+=("$model::$t")
        else
            why=$(grep -m1 -E "panicked at|deadlock" -A1 "$log" | tail -n 1 | cut -c1-100)
            echo "  mutant $model::$t: fails, as it must ($why)"
        fi
    done
done
if [ "$total" -eq 0 ]; then
    echo "mutants: no model test found"
    exit 1
fi
if [ "${#survivors[@]}" -ne 0 ]; then
    echo "mutants: FAILED: ${#survivors[@]} of $total model tests pass with their protocol broken"
    exit 1
fi
echo "mutants: all $total model tests fail with their protocol broken"
