# Sourced by .ci/run: each stage's wall time, and the full suite's time budget (tests/test_ci_stages.py runs these).

# The full suite's time budget, the one place it is stated (docs/development.md#the-suites-time): CI fails when
# `python -m pytest` takes longer, so a test that makes the suite slower is seen the day it lands, long before CI's
# 90-minute limit is.
FULL_SUITE_BUDGET_MIN=20

CI_START=$SECONDS
STAGE_TIMES=()

stage() {  # $1 = the stage's name, the rest = its command, run as given; prints its time, returns its status
    local name=$1 start=$SECONDS status=0
    shift
    "$@" || status=$?
    STAGE_TIMES+=("$(printf '  %-22s %6d s  (exit %d)' "$name" $((SECONDS - start)) "$status")")
    echo "stage $name: $((SECONDS - start)) s (exit $status)"
    return "$status"
}

stage_summary() {  # every stage so far and the total (.ci/run calls it on exit, whatever the outcome)
    echo "CI stage times:"
    if [ "${#STAGE_TIMES[@]}" -gt 0 ]; then printf '%s\n' "${STAGE_TIMES[@]}"; fi
    echo "CI total: $((SECONDS - CI_START)) s"
}

check_suite_budget() {  # $1 = the full suite's seconds; fails, saying what to do, when over the budget
    if [ "$1" -gt "$((FULL_SUITE_BUDGET_MIN * 60))" ]; then
        echo "the full suite took $1 s, over its budget of $FULL_SUITE_BUDGET_MIN min (FULL_SUITE_BUDGET_MIN in" \
            ".ci/stages.sh): see which tests grew with 'python -m pytest --durations=30'" \
            "(docs/development.md#the-suites-time)" >&2
        return 1
    fi
    echo "the full suite took $1 s of its $FULL_SUITE_BUDGET_MIN min budget"
}
