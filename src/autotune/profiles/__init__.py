"""Catalog data (GPUs, models, measurements) shipped as YAML inside the package, and its loaders."""
