#!/usr/bin/env bash
# taospec plan: jobs/hello.yaml (target hello, platform local)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /tmp/taospec-results/$JOB_ID
# Recorded as: image taospec-test/busybox:1, network_arch hello, action greet, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform local --image taospec-test/busybox:1 --network-arch hello --action greet --storage-tier A --results-root /tmp/taospec-results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 \
    /tmp/taospec-results/"$JOB_ID" /tmp/taospec-results/"$JOB_ID"/stage \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /tmp/taospec-results/$JOB_ID/stage/spec.yaml
install -m 0644 /dev/stdin /tmp/taospec-results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
greeting:
  repeat: 1
  text: hello, TAO
TAOSPEC_EOF

# launch: start the command in its own session; output goes to the log file
# the names of the exported variables and functions, one word each:
# shellcheck disable=SC2046
(unset -f $(compgen -A function); export -n $(compgen -e)
 export PATH="$PATH"
 exec setsid env \
    -C /tmp/taospec-results/"$JOB_ID" \
    TAO_JOB_ID="$JOB_ID" \
    HOME=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home \
    USER=root \
    LOGNAME=root \
    XDG_CACHE_HOME=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache \
    HF_HOME=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    TORCH_HOME=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    TRITON_CACHE_DIR=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    TORCHINDUCTOR_CACHE_DIR=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    MPLCONFIGDIR=/tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib \
    /bin/sh \
    -c 'exit_file=$1; shift; "$@"; code=$?; echo "$code" > "$exit_file.tmp" && command -p mv -f "$exit_file.tmp" "$exit_file"; exit "$code"' \
    taospec-job /tmp/taospec-results/"$JOB_ID"/taospec.exit sh \
    -c 'echo "hello from '"$JOB_ID"'" | tee /tmp/taospec-results/'"$JOB_ID"'/hello.txt && cat /tmp/taospec-results/'"$JOB_ID"/stage/spec.yaml) >/tmp/taospec-results/"$JOB_ID"/taospec.log 2>&1 </dev/null &
backend_ref="pid:$!"

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"
