#!/usr/bin/env bash
# taospec plan: jobs/tao-workflow.yaml (target prepare, platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action dataset_convert, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action dataset_convert --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /data/results/"$JOB_ID" /data/results/"$JOB_ID"/stage \
    /data/results/"$JOB_ID"/.tao-runtime /data/results/"$JOB_ID"/.tao-runtime/home \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
dataset:
  classes_file: /data/classes.yaml
  root_dir: /data
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin

# pull: pull the image unless the engine has it
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v /data/datasets/levir-cd:/data:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet dataset_convert \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

#!/usr/bin/env bash
# taospec plan: jobs/tao-workflow.yaml (target train[lr=0.0001], platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action train, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action train --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /data/results/"$JOB_ID" /data/results/"$JOB_ID"/stage \
    /data/results/"$JOB_ID"/.tao-runtime /data/results/"$JOB_ID"/.tao-runtime/home \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
dataset:
  root_dir: /prepared
train:
  num_epochs: 10
  num_gpus: 2
  optim:
    lr: 0.0001
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin

# pull: pull the image unless the engine has it
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --gpus '"device=0,1"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v /data/datasets/levir-cd:/data:ro \
    -v "$UPSTREAM_PREPARE":/prepared:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet train \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

#!/usr/bin/env bash
# taospec plan: jobs/tao-workflow.yaml (target train[lr=0.00005], platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action train, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action train --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /data/results/"$JOB_ID" /data/results/"$JOB_ID"/stage \
    /data/results/"$JOB_ID"/.tao-runtime /data/results/"$JOB_ID"/.tao-runtime/home \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
dataset:
  root_dir: /prepared
train:
  num_epochs: 10
  num_gpus: 2
  optim:
    lr: 5.0e-05
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin

# pull: pull the image unless the engine has it
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --gpus '"device=0,1"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v /data/datasets/levir-cd:/data:ro \
    -v "$UPSTREAM_PREPARE":/prepared:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet train \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

#!/usr/bin/env bash
# taospec plan: jobs/tao-workflow.yaml (target evaluate[lr=0.0001], platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action evaluate, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action evaluate --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /data/results/"$JOB_ID" /data/results/"$JOB_ID"/stage \
    /data/results/"$JOB_ID"/.tao-runtime /data/results/"$JOB_ID"/.tao-runtime/home \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
evaluate:
  checkpoint: /model/train/changenet_model_latest.pth
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin

# pull: pull the image unless the engine has it
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --gpus '"device=2"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v /data/datasets/levir-cd:/data:ro \
    -v "$UPSTREAM_TRAIN_LR_0_0001":/model:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet evaluate \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

#!/usr/bin/env bash
# taospec plan: jobs/tao-workflow.yaml (target evaluate[lr=0.00005], platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action evaluate, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action evaluate --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /data/results/"$JOB_ID" /data/results/"$JOB_ID"/stage \
    /data/results/"$JOB_ID"/.tao-runtime /data/results/"$JOB_ID"/.tao-runtime/home \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
evaluate:
  checkpoint: /model/train/changenet_model_latest.pth
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin

# pull: pull the image unless the engine has it
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --gpus '"device=2"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v /data/datasets/levir-cd:/data:ro \
    -v "$UPSTREAM_TRAIN_LR_0_00005":/model:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet evaluate \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"

#!/usr/bin/env bash
# taospec plan: jobs/tao-workflow.yaml (target export, platform docker)
# The job id is minted when the job is submitted; until then it shows as $JOB_ID.
# Results: /data/results/$JOB_ID
# Recorded as: image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt, network_arch visual_changenet, action export, storage tier A
# Values are single-quoted so that a $ in them stays literal, as in the spec.
# shellcheck disable=SC2016
set -euo pipefail

# The record comes first: it mints the id the container is named after.
JOB_ID="${JOB_ID:-$(taospec record open --platform docker --image nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt --network-arch visual_changenet --action export --storage-tier A --results-root /data/results)}"
[[ $JOB_ID =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || { echo "JOB_ID=$JOB_ID: not a job id (letters, digits, '.', '_' and '-'); unset it to open a record" >&2; exit 2; }
export JOB_ID
# A step that fails before the launch ends the record ERROR, as run records it.
trap 'taospec record mark "$JOB_ID" --state ERROR --message "the script stopped (exit $?) before the job launched"' EXIT

# prepare: create the results directory, its stage and the job's HOME and caches
install -d -m 0755 -o 1000 -g 1000 \
    /data/results/"$JOB_ID" /data/results/"$JOB_ID"/stage \
    /data/results/"$JOB_ID"/.tao-runtime /data/results/"$JOB_ID"/.tao-runtime/home \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/huggingface \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torch \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/triton \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/torchinductor \
    /data/results/"$JOB_ID"/.tao-runtime/home/.cache/matplotlib

# spec-file: write the experiment spec the job reads as /results/stage/spec.yaml
install -m 0644 -o 1000 -g 1000 /dev/stdin /data/results/"$JOB_ID"/stage/spec.yaml <<'TAOSPEC_EOF'
export:
  checkpoint: /model/train/changenet_model_latest.pth
  onnx_file: /results/model.onnx
TAOSPEC_EOF

# login: log in to NGC with the key fed on stdin, unless the image is already here
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || printf '%s' "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin

# pull: pull the image unless the engine has it
docker image inspect nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt >/dev/null 2>&1 || docker pull nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt

# launch: start the container detached, named and labelled after the job id
backend_ref=$(docker run -d --name "$JOB_ID" \
    --label tao-job="$JOB_ID" \
    --label tao-owner=root \
    --gpus '"device=3"' \
    --ipc=host \
    --shm-size=8g \
    --user 1000:1000 \
    -v /data/results/"$JOB_ID":/results \
    -v "$UPSTREAM_TRAIN_LR_0_0001":/model:ro \
    -e HOME=/results/.tao-runtime/home \
    -e USER=u1000 \
    -e LOGNAME=u1000 \
    -e XDG_CACHE_HOME=/results/.tao-runtime/home/.cache \
    -e HF_HOME=/results/.tao-runtime/home/.cache/huggingface \
    -e TORCH_HOME=/results/.tao-runtime/home/.cache/torch \
    -e TRITON_CACHE_DIR=/results/.tao-runtime/home/.cache/triton \
    -e TORCHINDUCTOR_CACHE_DIR=/results/.tao-runtime/home/.cache/torchinductor \
    -e MPLCONFIGDIR=/results/.tao-runtime/home/.cache/matplotlib \
    -e NGC_KEY \
    -e WANDB_MODE=offline \
    nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt visual_changenet export \
    -e /results/stage/spec.yaml \
    results_dir=/results)

trap - EXIT
taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"
