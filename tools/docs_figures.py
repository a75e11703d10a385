"""Regenerate the figures in docs/img/ from the shipped calibration (the pictures docs/cost-model.md shows).

Usage: python tools/docs_figures.py   (overwrites docs/img/*.png; needs the plot extra)
"""

from __future__ import annotations

from pathlib import Path

from autotune.cli.app import main

IMG = Path(__file__).resolve().parents[1] / "docs" / "img"
FIGURES = {
    "validation.png": ["validate"],
    "plan-llama3-8b-4090.png": ["plan", "llama3-8b", "--gpu", "4090", "--seq-len", "2048"],
    "sweep-llama3-8b-4090.png": ["sweep", "llama3-8b", "--gpu", "4090", "--seq-len", "512,1024,2048,4096,8192"],
}


def run(argv: list[str]) -> None:
    """Run one autotune command in-process; a non-zero exit is an error here."""
    try:
        main(argv)
    except SystemExit as exit_:
        if exit_.code:
            raise


def generate() -> None:
    """Write every figure (the CLI refuses to overwrite, so old files are removed first)."""
    IMG.mkdir(parents=True, exist_ok=True)
    for name, argv in FIGURES.items():
        target = IMG / name
        target.unlink(missing_ok=True)
        run([*argv, "--plot", str(target)])
        print(f"wrote {target}")


if __name__ == "__main__":
    generate()
