.PHONY: quality style test test-fast
quality:
	ruff check src tests benchmarks tools
	ruff format --check src tests benchmarks tools
	mypy
	lint-imports
	vulture src tests benchmarks tools tools/vulture_whitelist.py --min-confidence 60
	python -m pytest -q -n 0 -p no:cacheprovider tests/unit/test_sizes.py tests/unit/test_import_contracts.py
style:
	ruff check --fix src tests benchmarks tools
	ruff format src tests benchmarks tools
test:
	python -m pytest -q --all
test-fast:
	python -m pytest -q
