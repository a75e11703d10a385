.PHONY: quality style test test-fast
quality:
	ruff check src tests benchmarks
	ruff format --check src tests benchmarks
	mypy
	lint-imports
style:
	ruff check --fix src tests benchmarks
	ruff format src tests benchmarks
test:
	python -m pytest -q
test-fast:
	python -m pytest -q -m "not slow"
