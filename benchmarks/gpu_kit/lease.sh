#!/bin/bash
# One lent-GPU call, in the order the developers' brief asks for (issue 44 and the queued gpu_sweep entries):
#   1. gpu_sweep.py: the host-link probe, the fixed LoRA fast path (lora-m2-noc), QLoRA, Liger (no plain-script twins);
#   2. gpu_levers.py: torchtune's 8B full single-device recipe, the same levers on our stack, FP8 vs bf16 per layer;
#   3. `autotune probe` as a user runs it (plan, then probe with its neighbours) on the 1B kit model.
# Run from the checkout's root on the GPU machine, with the wheels in .gpu/ (carried):
#   .gpu/whl  (../shared/gpu-kit/fetch-wheels.sh + liger-kernel 0.8.5, hjson), .gpu/tt (torchtune 0.6.1, omegaconf 2.3.0,
#   antlr4-python3-runtime 4.9.3 built here), .gpu/ao0.14.1 (torchao 0.14.1: the newest that torchtune 0.6.1 imports).
# Everything it keeps goes to $OUT (at most 8 files): env.txt, sweep.log, sweep.tgz, levers.jsonl, levers.log,
# probe.log, probe.tgz. Each stage has its own time limit, so one stage's failure or overrun leaves the others.
set -u
SECONDS=0
TOTAL=${TOTAL_S:-560}
W=/tmp/at; R=$W/results; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .gpu/whl/*.whl .gpu/tt/*.whl .gpu/ao0.14.1/*.whl || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/benchmarks PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 AUTOTUNE_ALLOW_UNTESTED_STACK=1
AT=(python3 -c "import sys; from autotune.cli.app import main; sys.argv[0] = 'autotune'; main()")
{ date -u; cat .gpu/commit 2>/dev/null; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  nproc; free -g | head -2
  python3 -c "import torch, transformers, peft, accelerate, bitsandbytes, datasets, torchao, torchtune, liger_kernel; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'accelerate', accelerate.__version__, 'bnb', bitsandbytes.__version__, 'datasets', datasets.__version__, 'torchao', torchao.__version__, 'torchtune', torchtune.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"; echo "setup done at $SECONDS s"

timeout $((TOTAL - SECONDS - 260)) python3 benchmarks/gpu_sweep.py --results "$R/sweep" --work "$W" \
  --budget-s $((TOTAL - SECONDS - 270)) --no-baselines --only lora-m2-noc,qlora-m2-noc,lora-m2-noc-liger,levers-full-8b,levers-fp8-lora-8b,levers-offload-lora-1b,levers-rounding-full-8b,levers-fp8-full-8b \
  > "$OUT/sweep.log" 2>&1
tail -8 "$OUT/sweep.log"; tar -czf "$OUT/sweep.tgz" -C "$R" sweep; echo "sweep done at $SECONDS s"

timeout $((TOTAL - SECONDS - 90)) python3 benchmarks/gpu_levers.py --all --out "$OUT/levers.jsonl" \
  --budget-s $((TOTAL - SECONDS - 95)) > "$OUT/levers.log" 2>&1
cut -c1-400 "$OUT/levers.jsonl"; echo "levers done at $SECONDS s"

mkdir -p "$R/probe"
{ python3 benchmarks/gpu_kit/make_model.py benchmarks/gpu_kit/configs/llama3.2-1b.json "$W/models/llama3.2-1b" | tail -1
  "${AT[@]}" plan "$W/models/llama3.2-1b" --gpu h200 --seq-len 2048 --method lora -o "$W/probe-plan.yaml"
  timeout $((TOTAL - SECONDS)) "${AT[@]}" probe "$W/probe-plan.yaml" --dataset "$W/data.jsonl" --steps 4 \
    -o "$R/probe/calibration.yaml" --runs-dir "$R/probe/runs"
} > "$OUT/probe.log" 2>&1
tail -30 "$OUT/probe.log"; cp "$W/probe-plan.yaml" "$R/probe/" 2>/dev/null
find "$R/probe" \( -name final -o -name checkpoints \) -prune -exec rm -rf {} + 2>/dev/null
tar -czf "$OUT/probe.tgz" -C "$R" probe; echo "all done at $SECONDS s"
