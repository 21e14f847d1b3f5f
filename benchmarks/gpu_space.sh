#!/bin/bash
# A measured GPU space for target=replay (docs/USAGE.md §Measuring a space; data/spaces/README.md): a uniform
# sample of SAMPLE configs of a CUDA template space (TEMPLATE direct or winograd) of one of ResNet-18's 3x3
# stride-1 convolutions (CHANNELS 64, 128, 256 or 512: 56x56, 28x28, 14x14, 7x7), each timed under the
# measurement protocol on the GPU, written as one space file into OUT. PART K/N measures the K-th of N disjoint
# parts of that seeded sample (one per GPU loan; join the files with `python -m tunebench space merge`, which
# refuses parts from another GPU model or driver). Method comparisons on it then need no GPU:
#   python -m tunebench suite --spaces OUT/<file> --methods random,autotvm,chameleon,flextensor,dgp
#
#   benchmarks/gpu_space.sh [OUT=data/spaces] [SAMPLE=1000] [TARGET=cuda] [TEMPLATE=direct] [CHANNELS=128] [PART=1/1]
#   benchmarks/gpu_space.sh /tmp/spaces 4 llvm direct 64 1/2     (the dry run on a CPU: llvm has no winograd)
# At >= 3 trials/s a 1,000-config sample takes ~6 minutes; at 1-2 s per trial split it with PART.
set -euo pipefail
OUT=${1:-data/spaces}; SAMPLE=${2:-1000}; TARGET=${3:-cuda}; TEMPLATE=${4:-direct}; CHANNELS=${5:-128}
PART=${6:-1/1}
case "$CHANNELS" in
  64) SIZE=56 ;; 128) SIZE=28 ;; 256) SIZE=14 ;; 512) SIZE=7 ;;
  *) echo "error: CHANNELS=$CHANNELS: must be one of 64, 128, 256, 512 (ResNet-18's 3x3 stride-1 convolutions)" >&2
     exit 2 ;;
esac
case "$TEMPLATE" in
  direct|winograd) ;;
  *) echo "error: TEMPLATE=$TEMPLATE: must be direct or winograd" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
LAYER="[{in_channels:$CHANNELS,height:$SIZE,width:$SIZE,out_channels:$CHANNELS,kernel:3,stride:1,padding:1}]"
TEMPLATE_ARG=()
[ "$TEMPLATE" = direct ] || TEMPLATE_ARG=("target.template=$TEMPLATE")
mkdir -p "$OUT"
echo "$(date -u +%FT%TZ) $(uptime); commit $(git -C "$HERE" rev-parse --short HEAD)"
cd "$HERE"
python3 -m tunebench space measure --out "$OUT" --sample "$SAMPLE" --part "$PART" model=layers \
    "model.layers=$LAYER" "target=$TARGET" "${TEMPLATE_ARG[@]}" seed=0
ls -l "$OUT"
