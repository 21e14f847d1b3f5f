#!/bin/bash
# Glimpse against AutoTVM on a GPU, the leave-out protocol of docs/RESULTS.md §Glimpse: a model trained on the
# CPU variants' measurements plus static GPU validity labels (python -m tunebench glimpse train --records ...
# --gpu-static-tags 40 --out MODEL), then 3 ResNet-18 conv2d layers x TRIALS trials x SEEDS seeds, autotvm and
# glimpse, and the table (invalid configs, trials to AutoTVM's best). The prior is off on cuda: a model
# trained on CPU records knows the x86 template's knobs, not the CUDA template's (the run would refuse it).
#
#   benchmarks/glimpse_gpu_tune.sh MODEL [TARGET=cuda] [TRIALS=64] [SEEDS=0]     (about 7 minutes a layer on an H100)
#   benchmarks/glimpse_gpu_tune.sh MODEL llvm 8 0                                (the dry run on a CPU)
#
# One run per layer and method, autotvm then glimpse on each layer before the next, so that a cut-short
# session still leaves whole layers. BUDGET_S (default unlimited): no layer is started unless the time left is
# at least the longest layer so far; the table is printed from the layers that finished. ONLY="1 2" runs only
# those layers (0-based, in the order 64->64 56^2, 128->128 28^2, 256->256 14^2), e.g. to finish an earlier
# work dir (WORK=...) whose first layer is done.
set -euo pipefail
MODEL=$(realpath "$1"); TARGET=${2:-cuda}; TRIALS=${3:-64}; SEEDS=${4:-0}; BUDGET_S=${BUDGET_S:-0}; ONLY=${ONLY:-0 1 2}
HERE=$(cd "$(dirname "$0")/.." && pwd)
for i in $ONLY; do
  case $i in 0|1|2) ;; *) echo "error: ONLY='$ONLY': the layers are 0, 1 and 2" >&2; exit 2 ;; esac
done
WORK=${WORK:-$(mktemp -d /tmp/glimpse-gpu-XXXX)}
LAYERS=('{in_channels:64,height:56,width:56,out_channels:64,kernel:3,stride:1,padding:1}'
        '{in_channels:128,height:28,width:28,out_channels:128,kernel:3,stride:1,padding:1}'
        '{in_channels:256,height:14,width:14,out_channels:256,kernel:3,stride:1,padding:1}')
PRIOR=true; [ "$TARGET" = cuda ] && PRIOR=false
mkdir -p "$WORK" && cd "$WORK"
echo "work dir $WORK; $(uptime)"
start=$SECONDS; longest=0
for i in $ONLY; do
  layer=${LAYERS[$i]}
  left=$((BUDGET_S - (SECONDS - start)))
  if [ "$BUDGET_S" -gt 0 ] && [ "$left" -lt "$longest" ]; then
    echo "== stopping: ${left} s left, the longest layer took ${longest} s"; break
  fi
  t0=$SECONDS
  echo "== layer $layer ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
  common=(model=layers "model.layers=[$layer]" target=$TARGET budget.trials_per_task=$TRIALS e2e.enabled=false
          experiment=glimpse-eval)
  python3 "$HERE/run.py" -m method=autotvm "seed=$SEEDS" "${common[@]}"
  python3 "$HERE/run.py" -m method=glimpse "method.pretrained=$MODEL" "method.use_prior=$PRIOR" "seed=$SEEDS" \
      "${common[@]}"
  took=$((SECONDS - t0)); [ "$took" -gt "$longest" ] && longest=$took
  echo "== layer done in ${took} s"
done
python3 "$HERE/benchmarks/glimpse_table.py" "$WORK" --experiment glimpse-eval --out "$WORK/glimpse_$TARGET.json"
