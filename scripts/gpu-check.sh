#!/usr/bin/env bash
# The GPU check, for a fresh machine with a GPU and no network, in one run of under 5 minutes.
#
# The machine's image has Python, torch, pytest, hypothesis, numpy and rich, but not this project
# (nor, maybe, bubblewrap: the sandbox then falls back and says which protections are in force).
# The script installs the project without touching the network (plus any wheels carried in
# wheels/ beside it), then checks what only a GPU can show:
#   1. the sandbox's template imports nothing that initializes CUDA (workers are forked from it);
#   2. the graded suite passes on the reference and runs (every test failing) on the stubs;
#   3. the examples and the bug zoo get the same gradebook on the GPU as on the CPU, printed side
#      by side;
#   4. the decode benchmark runs on the GPU.
#
#   scripts/gpu-check.sh [--device cuda|cpu] [--out DIR] [--jobs N] [--step-timeout S]
#
# --device cpu is the dry run for a machine without a GPU (both gradebooks then come from the
# CPU; on a small busy machine give it --step-timeout 1200). Logs go to DIR (default: $OUT when
# set, else a new temporary folder); the exit status is the number of failed checks.
set -uo pipefail
cd "$(dirname "$0")/.."

device=cuda
out=${OUT:-}
jobs=$(($(nproc) < 8 ? $(nproc) : 8))
step_timeout=240  # seconds per step: the whole run must fit in 5 minutes on the GPU machine
while [ $# -gt 0 ]; do
    case $1 in
        --device) device=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --step-timeout) step_timeout=$2; shift 2 ;;
        *) echo "usage: $0 [--device cuda|cpu] [--out DIR] [--jobs N] [--step-timeout S]" >&2
           exit 2 ;;
    esac
done
out=${out:-$(mktemp -d -t gpu-check-XXXXXX)}
mkdir -p "$out/logs"
py=${PYTHON:-python3}
failed=0
started=$SECONDS

# step NAME EXPECTED_STATUS COMMAND...: run with a time limit, keep the log, say how it went.
step() {
    local name=$1 expected=$2 log="$out/logs/$1.log" status
    shift 2
    local t0=$SECONDS
    timeout "$step_timeout" "$@" >"$log" 2>&1
    status=$?
    if [ "$status" -eq "$expected" ]; then
        printf 'ok    %-28s %4d s\n' "$name" $((SECONDS - t0))
    else
        printf 'FAIL  %-28s %4d s (exit %d, expected %d); end of %s:\n' \
            "$name" $((SECONDS - t0)) "$status" "$expected" "$log"
        tail -n 30 "$log" | sed 's/^/      /'
        failed=$((failed + 1))
    fi
    return 0
}

echo "== machine"
"$py" - <<'EOF'
import platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, "
      f"CUDA available: {torch.cuda.is_available()}")
if torch.cuda.is_available():
    print(f"GPU: {torch.cuda.get_device_name(0)}")
EOF
command -v bwrap >/dev/null && echo "bubblewrap: $(command -v bwrap)" ||
    echo "bubblewrap: absent (the sandbox falls back and says so)"
echo "device under test: $device; jobs: $jobs; logs: $out/logs"

echo "== install (no network)"
shopt -s nullglob
wheels=(wheels/*.whl scripts/wheels/*.whl)
shopt -u nullglob
if [ ${#wheels[@]} -gt 0 ]; then
    step install-wheels 0 "$py" -m pip install --no-deps --no-index "${wheels[@]}"
fi
if "$py" -m pip install --no-deps --no-build-isolation --no-index -e . \
    >"$out/logs/install.log" 2>&1; then
    echo "ok    installed the project (editable)"
else
    echo "note  pip could not install the project (see logs/install.log); using PYTHONPATH"
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi

echo "== checks"
# What the template imports before it forks must leave CUDA alone, so a forked worker can use it.
step template-leaves-cuda-alone 0 "$py" -c "
import os, sys, torch, torch._dynamo, torch.fx.experimental.symbolic_shapes, autograder.sandbox.executor
assert not torch.cuda.is_initialized(), 'the template initialized CUDA'
if sys.argv[1] == 'cuda':
    pid = os.fork()
    if pid == 0:
        try:
            torch.cuda.init()
            os._exit(0 if (torch.ones(2, device='cuda') * 2).sum().item() == 4 else 1)
        except BaseException as exc:
            print(exc)
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0, 'a worker forked from the template cannot use CUDA'
" "$device"
step suite-reference 0 "$py" -m pytest tests/graded -q -p no:cacheprovider --device "$device"
# The stubs raise NotImplementedError everywhere: every test fails (exit 1), none errors.
step suite-stubs 1 "$py" -m pytest tests/graded -q -p no:cacheprovider --device "$device" \
    --submission assignments
if grep -Eq '[0-9]+ (passed|error)' "$out/logs/suite-stubs.log"; then
    echo "FAIL  suite-stubs: a stub test passed or errored"
    failed=$((failed + 1))
fi
# The same grading on the device under test and on the CPU: the grades must not differ. The
# examples are those kept in examples/ and the single-bug ones written from the zoo.
step write-examples 0 "$py" -m autograder examples --out "$out/examples-written"
for pass in "under-test:$device" "reference:cpu"; do
    label=${pass%%:*} d=${pass#*:}
    step "grade-examples-$label" 0 "$py" -m autograder grade examples/submissions \
        "$out/examples-written" --out "$out/examples-$label" --device "$d" --jobs "$jobs"
    step "zoo-$label" 0 "$py" -m autograder zoo --out "$out/zoo-$label" --device "$d" \
        --jobs "$jobs"
done
for what in examples zoo; do
    a="$out/$what-under-test/gradebook.csv" b="$out/$what-reference/gradebook.csv"
    echo "== $what: gradebook on $device | on cpu"
    if [ -f "$a" ] && [ -f "$b" ]; then
        if command -v column >/dev/null; then
            paste -d '|' "$a" "$b" | column -t -s '|'
        else  # not on every image
            paste -d '|' "$a" "$b"
        fi
        if cmp -s "$a" "$b"; then
            echo "ok    the $what gradebooks are equal"
        else
            echo "FAIL  the $what gradebooks differ"
            failed=$((failed + 1))
        fi
    else
        echo "FAIL  a $what gradebook is missing"
        failed=$((failed + 1))
    fi
done

echo "== decode benchmark on $device"
step decode 0 "$py" benchmarks/decode.py --device "$device"
grep '^{' "$out/logs/decode.log"

elapsed=$((SECONDS - started))
echo "== $failed failed check(s), $elapsed s in all (target on the GPU machine: under 300 s)"
exit "$failed"
