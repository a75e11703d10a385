"""CPU seconds per parameter of torchao's stochastically rounded AdamW step (``bf16_stochastic_rounding``).

torchao's ``_AdamW`` steps each parameter through one ``torch.compile``'d function (``torchao/optim/adam.py``,
``single_param_adam``) after a ``step += 1``: per parameter, a compiled call (guards, the inductor wrapper) where
torch's foreach AdamW dispatches a few ops per chunk of tensors. This prints the CPU cost of one parameter's step on
tiny tensors (the kernels' own time negligible), after the compiles: the figure ``optimizer_step`` prices the
compiled call at (``costmodel.priors.TORCHAO_STEP_CALL_S``). Needs torchao (``pip install -e ".[fp8]"``).

    python benchmarks/sr_step_overhead.py [--params 200] [--steps 20]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    """Print the mean CPU seconds per parameter of ``_AdamW(bf16_stochastic_round=True).step()``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    import torch
    from torchao.optim import _AdamW

    params = [torch.nn.Parameter(torch.zeros(64, dtype=torch.bfloat16)) for _ in range(args.params)]
    optimizer = _AdamW(params, lr=1e-3, bf16_stochastic_round=True)
    for param in params:
        param.grad = torch.full_like(param, 1e-3)
    optimizer.step()  # the compile (one shape: one graph)
    started = time.perf_counter()
    for _ in range(args.steps):
        optimizer.step()
    per_param_s = (time.perf_counter() - started) / (args.steps * args.params)
    print(
        f"torchao _AdamW(bf16_stochastic_round=True): {per_param_s * 1e6:.1f} us CPU per parameter per step "
        f"({args.params} parameters of 64 elements, {args.steps} steps, torch {torch.__version__})"
    )


if __name__ == "__main__":
    main()
