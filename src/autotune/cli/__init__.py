"""Thin typer CLI: each module registers one command; domain errors are rendered once in ``app.main``."""
