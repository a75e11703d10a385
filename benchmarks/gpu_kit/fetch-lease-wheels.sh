#!/bin/bash
# Run here (a machine that reaches the package index), from the checkout's root, before a lent-GPU call:
# fills .gpu/ (git-ignored: add "/.gpu/" to .git/info/exclude) with what benchmarks/gpu_kit/lease.sh installs on the
# bare CUDA image (Python 3.12, x86-64, torch 2.11 there), then records the commit the call will run.
#   .gpu/whl      ../shared/gpu-kit/fetch-wheels.sh (pydantic, typer, rich, datasets, peft, transformers, bitsandbytes
#                 cut to CUDA 13.0 + CPU) plus liger-kernel 0.8.5 and hjson 3.1.0
#   .gpu/tt       torchtune 0.6.1 (the peer recipe), omegaconf 2.3.0 and antlr4-python3-runtime 4.9.3 (sdist only on
#                 the index: built into a wheel here)
#   .gpu/ao0.14.1 torchao 0.14.1: the newest torchao that torchtune 0.6.1 imports (0.17 dropped int4_weight_only);
#                 its float8 training runs without its C++ extensions, which it skips on another torch
# About 44 MB; carry it with run's carry: [".gpu"] and run: bash benchmarks/gpu_kit/lease.sh
set -eu
kit=${KIT:-../shared/gpu-kit}
mkdir -p .gpu
(cd .gpu && bash "$OLDPWD/$kit/fetch-wheels.sh" whl)
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)
pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .gpu/whl liger-kernel==0.8.5 hjson==3.1.0
pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .gpu/ao0.14.1 torchao==0.14.1
pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .gpu/tt torchtune==0.6.1
pip wheel -q --no-deps -w .gpu/tt antlr4-python3-runtime==4.9.3 omegaconf==2.3.0
git rev-parse HEAD > .gpu/commit
du -sh .gpu
