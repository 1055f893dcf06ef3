#!/bin/sh
# run.sh: runs each test program given as an argument, shows its output, and ends with
# one summary line "total: N passed, N failed" counted from Check's own summary lines.
# Exits non-zero when any program fails or crashes. With SBX_VALGRIND=1 each program
# runs under valgrind (leaks and errors fail the run).
set -u
passed=0; failed=0; bad_programs=""
for t in "$@"; do
        name=$(basename "$t")
        echo "=== $name"
        out=$(mktemp)
        if [ "${SBX_VALGRIND:-0}" = 1 ]; then
                CK_FORK=no CK_DEFAULT_TIMEOUT=600 valgrind -q --error-exitcode=99 --leak-check=full \
                        --errors-for-leak-kinds=definite --trace-children=no "$t" >"$out" 2>&1
        else
                "$t" >"$out" 2>&1
        fi
        rc=$?
        cat "$out"
        line=$(grep -E '^[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$out" | tail -n 1)
        if [ -n "$line" ]; then
                checks=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
                fails=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1+\2/')
                fails=$(( $fails ))
                passed=$((passed + checks - fails)); failed=$((failed + fails))
        fi
        if [ $rc -ne 0 ] || [ -z "$line" ]; then
                bad_programs="$bad_programs $name"
                [ -n "$line" ] && [ "$fails" -gt 0 ] || failed=$((failed + 1))
        fi
        rm -f "$out"
done
[ -z "$bad_programs" ] || echo "failing programs:$bad_programs"
echo "total: $passed passed, $failed failed"
[ -z "$bad_programs" ]
