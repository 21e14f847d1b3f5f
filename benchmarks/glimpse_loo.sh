#!/bin/bash
# Glimpse's leave-one-variant-out experiment on CPU variants (docs/RESULTS.md §Glimpse), in one command:
#
#   data   random search on every training variant: TRAIN_TRIALS configs of each of six ResNet-18 and VGG-16
#          3x3 conv2d layers per variant (the run store Glimpse trains on);
#   train  one model per seed from those runs, with the Blueprint and with a constant one (the ablation);
#   eval   the held-out variant: autotvm at 128 trials, glimpse and glimpse-constant at EVAL_TRIALS, chameleon
#          and dgp at EVAL_TRIALS (the reduced settings of RESULTS), three of the layers, every seed;
#   table  benchmarks/glimpse_table.py over the eval runs -> $WORK/glimpse_loo.json;
#   ablation  the Blueprint ablation interleaved: per eval layer and seed, one run of each of ARMS in turn (the
#          first arm rotating with the seed), so that the machine's drift falls on every arm alike; the arms:
#          spec, const (glimpse with the Blueprint and with the constant one) and spec-ei, const-ei (the same
#          with expected improvement in place of the learned acquisition), and autotvm (at AUTOTVM_TRIALS: the
#          reference measured beside the arms); its table over these runs (the reference: the ablation's
#          autotvm runs, or without that arm the eval stage's) -> $WORK/glimpse_ablation.json. Not in the
#          default STAGES.
#
#   benchmarks/glimpse_loo.sh [WORK]                 (80 minutes on the 2-core VM with the defaults)
#   TRAIN_TRIALS=8 EVAL_TRIALS=8 AUTOTVM_TRIALS=8 SEEDS=0 BASELINES= benchmarks/glimpse_loo.sh /tmp/w  (dry run)
#
# Environment: TRAIN_TRIALS (128), EVAL_TRIALS (64), AUTOTVM_TRIALS (128), SEEDS (0,1,2), MCPUS ("nehalem
# sandybridge haswell skylake-avx512"), THREADS ("1 2"), HOLDOUT (haswell/2), BASELINES ("chameleon dgp"),
# STAGES ("data train eval table"; a later stage reuses the work dir's earlier ones; "ablation" too), ARMS
# ("spec const spec-ei const-ei"; add autotvm for a reference measured beside them), ABLATION_LAYERS (eval layers by position, "0 1 2").
# Nothing else should run on the machine meanwhile: every trial is a timed measurement. The default variants
# need a CPU with AVX-512 (skylake-avx512); on another machine the script stops before measuring anything,
# naming the variants it could run instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(realpath -m "${1:-$(mktemp -d /tmp/glimpse-loo-XXXX)}")
TRAIN_TRIALS=${TRAIN_TRIALS:-128}; EVAL_TRIALS=${EVAL_TRIALS:-64}; AUTOTVM_TRIALS=${AUTOTVM_TRIALS:-128}
SEEDS=${SEEDS:-0,1,2}; MCPUS=${MCPUS:-nehalem sandybridge haswell skylake-avx512}; THREADS=${THREADS:-1 2}
HOLDOUT=${HOLDOUT:-haswell/2}; BASELINES=${BASELINES-chameleon dgp}; STAGES=${STAGES:-data train eval table}
ARMS=${ARMS:-spec const spec-ei const-ei}
L='in_channels:%d,height:%d,width:%d,out_channels:%d,kernel:3,stride:1,padding:1'
layer() { printf "{$L}" "$@"; }
# ResNet-18: 64->64 at 56, 128->128 at 28, 256->256 at 14, 512->512 at 7; VGG-16: 256->512 at 28, 512->512 at 14
EVAL_LAYER_LIST=("$(layer 64 56 56 64)" "$(layer 256 14 14 256)" "$(layer 512 14 14 512)")
EVAL_LAYERS="[$(IFS=,; echo "${EVAL_LAYER_LIST[*]}")]"
TRAIN_LAYERS="[$(layer 64 56 56 64),$(layer 128 28 28 128),$(layer 256 14 14 256),$(layer 512 7 7 512),\
$(layer 256 28 28 512),$(layer 512 14 14 512)]"
has() { [[ " $STAGES " == *" $1 "* ]]; }
if has data || has eval || has ablation; then  # every variant measured must run on this machine: refused up front
  variants=(); has data && variants+=($MCPUS); has eval || has ablation && variants+=("${HOLDOUT%/*}")
  python3 -c 'import sys
from tunebench.errors import UserError
from tunebench.targets.tvm.llvm import refuse_unrunnable
for m in dict.fromkeys(sys.argv[1:]):
    try:
        refuse_unrunnable(m)  # an unknown name too: it checks the name first
    except UserError as e:
        print(f"error: glimpse_loo: {e}; set MCPUS and HOLDOUT to variants this machine runs", file=sys.stderr)
        sys.exit(2)
' "${variants[@]}" || exit 2
fi
mkdir -p "$WORK" && cd "$WORK"
echo "glimpse_loo: work dir $WORK, commit $(git -C "$HERE" rev-parse --short HEAD), $(uptime)"
run() { python3 "$HERE/run.py" "$@" e2e.enabled=false; }

if has data; then
  i=0
  for m in $MCPUS; do for t in $THREADS; do
    i=$((i + 1))
    [ "$m/$t" = "$HOLDOUT" ] && continue
    echo "== training data: $m at $t threads ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
    run method=random model=layers "model.layers=$TRAIN_LAYERS" target.mcpu="$m" target.num_cores="$t" \
        budget.trials_per_task="$TRAIN_TRIALS" target.runner.repeat=3 seed="$i" experiment=glimpse-train
  done; done
fi

if has train; then
  mapfile -t RUNS < <(grep -l "^experiment: glimpse-train" records/*/config.yaml | xargs -n1 dirname)
  [ "${#RUNS[@]}" -gt 0 ] || { echo "error: no glimpse-train runs under $WORK/records (run the data stage)"; exit 2; }
  for s in ${SEEDS//,/ }; do
    python3 -m tunebench glimpse train --records "${RUNS[@]}" --out "glimpse_spec_s$s.pt" --seed "$s"
    python3 -m tunebench glimpse train --records "${RUNS[@]}" --out "glimpse_const_s$s.pt" --seed "$s" \
        --constant-blueprint
  done
fi

if has eval; then
  hm=${HOLDOUT%/*}; ht=${HOLDOUT#*/}
  common=(model=layers "model.layers=$EVAL_LAYERS" target.mcpu="$hm" target.num_cores="$ht" "seed=$SEEDS"
          experiment=glimpse-loo)
  run -m method=autotvm budget.trials_per_task="$AUTOTVM_TRIALS" "${common[@]}"
  for b in $BASELINES; do
    case $b in
      chameleon) extra=(method.plan_size=16 method.iteration_opt=4) ;;
      dgp) extra=(method.tuning_set_size=24 method.top_k=8 method.source_tuner.plan_size=32) ;;
      *) extra=() ;;
    esac
    run -m method="$b" budget.trials_per_task="$EVAL_TRIALS" "${extra[@]}" "${common[@]}"
  done
  run -m method=glimpse "method.pretrained=$WORK/glimpse_spec_s\${seed}.pt" budget.trials_per_task="$EVAL_TRIALS" \
      "${common[@]}"
  run -m method=glimpse method.blueprint=constant "method.pretrained=$WORK/glimpse_const_s\${seed}.pt" \
      budget.trials_per_task="$EVAL_TRIALS" "${common[@]}"
fi

if has table; then
  python3 "$HERE/benchmarks/glimpse_table.py" "$WORK" --experiment glimpse-loo --out "$WORK/glimpse_loo.json"
fi

if has ablation; then
  hm=${HOLDOUT%/*}; ht=${HOLDOUT#*/}
  read -ra arms <<< "$ARMS"
  for arm in "${arms[@]}"; do
    [[ " spec const spec-ei const-ei autotvm " == *" $arm "* ]] ||
      { echo "error: ARMS: unknown arm '$arm' (spec, const, spec-ei, const-ei, autotvm)"; exit 2; }
  done
  ref=(--reference-experiment glimpse-loo)
  [[ " $ARMS " == *" autotvm "* ]] && ref=()
  for li in ${ABLATION_LAYERS:-0 1 2}; do l=${EVAL_LAYER_LIST[$li]}; for s in ${SEEDS//,/ }; do
    for ((k = 0; k < ${#arms[@]}; k++)); do
      arm=${arms[$(((k + s) % ${#arms[@]}))]}
      method=glimpse; trials=$EVAL_TRIALS
      case $arm in
        autotvm) method=autotvm; trials=$AUTOTVM_TRIALS; extra=() ;;
        spec) extra=("method.pretrained=$WORK/glimpse_spec_s$s.pt") ;;
        const) extra=(method.blueprint=constant "method.pretrained=$WORK/glimpse_const_s$s.pt") ;;
        spec-ei) extra=("method.pretrained=$WORK/glimpse_spec_s$s.pt" method.use_acquisition=false) ;;
        const-ei) extra=(method.blueprint=constant "method.pretrained=$WORK/glimpse_const_s$s.pt"
                         method.use_acquisition=false) ;;
      esac
      echo "== ablation: $arm, seed $s, layer $l ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
      run method="$method" "${extra[@]}" model=layers "model.layers=[$l]" target.mcpu="$hm" target.num_cores="$ht" \
          seed="$s" budget.trials_per_task="$trials" experiment=glimpse-ablation
    done
  done; done
  python3 "$HERE/benchmarks/glimpse_table.py" "$WORK" --experiment glimpse-ablation "${ref[@]}" \
      --out "$WORK/glimpse_ablation.json"
fi
