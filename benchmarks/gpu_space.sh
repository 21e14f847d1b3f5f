#!/bin/bash
# A measured GPU space for target=replay (docs/USAGE.md §Measuring a space; data/spaces/README.md): a uniform
# sample of SAMPLE configs of the CUDA template space of ResNet-18's 128->128, 28x28, 3x3 convolution, each
# timed under the measurement protocol on the GPU, written as one space file into OUT. Method comparisons on it
# then need no GPU: python -m tunebench suite --spaces OUT/<file> --methods random,autotvm,chameleon,flextensor
#
#   benchmarks/gpu_space.sh [OUT=data/spaces] [SAMPLE=96] [TARGET=cuda]   (3-10 min at 2-6 s per CUDA trial)
#   benchmarks/gpu_space.sh /tmp/spaces 4 llvm                               (the dry run on a CPU)
set -euo pipefail
OUT=${1:-data/spaces}; SAMPLE=${2:-96}; TARGET=${3:-cuda}
HERE=$(cd "$(dirname "$0")/.." && pwd)
LAYER='[{in_channels:128,height:28,width:28,out_channels:128,kernel:3,stride:1,padding:1}]'
mkdir -p "$OUT"
echo "$(date -u +%FT%TZ) $(uptime); commit $(git -C "$HERE" rev-parse --short HEAD)"
cd "$HERE"
python3 -m tunebench space measure --out "$OUT" --sample "$SAMPLE" model=layers "model.layers=$LAYER" \
    "target=$TARGET" seed=0
ls -l "$OUT"
