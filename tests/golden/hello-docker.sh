#!/usr/bin/env bash
# taospec plan: jobs/hello-docker.yaml (target hello-docker, platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /tmp/taospec-results/$JOB_ID
# Recorded as: image taospec-test/busybox:1, network_arch hello, action greet, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image taospec-test/busybox:1 --network-arch hello --action greet --storage-tier A --results-root /tmp/taospec-results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /tmp/taospec-results/"$JOB_ID" /tmp/taospec-results/"$JOB_ID"/stage \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /tmp/taospec-results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 \
    /dev/stdin /tmp/taospec-results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
greeting:
  text: hello, TAO
TAOSPEC_EOF

# pull: pull the image unless the engine has it
docker image inspect taospec-test/busybox:1 >/dev/null 2>&1 || docker pull taospec-test/busybox:1

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --ipc=host \
    --shm-size=64m \
    --user 1000:1000 \
    -v /tmp/taospec-results/"$JOB_ID":/results \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    taospec-test/busybox:1 sh \
    -c 'echo "hello from '"$JOB_ID"'" | tee /results/hello.txt && cat /results/stage/spec.yaml')

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"
