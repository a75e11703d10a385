"""Catalog data shipped as YAML inside the package, and the readers that turn files into schemas.

The catalog holds GPUs, models, measurements and the shipped calibration.

Modules:
  csv_lines      a measurements CSV's lines streamed in constant memory, with a progress bar for long ones
  interconnects  the network profiles (NVLink, PCIe with / without P2P, InfiniBand, RoCE, EFA, Ethernet) and the
                 default per GPU (interconnects.yaml)
  shipped_yaml   reading a YAML file shipped with the package
  catalog          GPU and model catalogs: list, resolve names and aliases, load profiles
  measurements     the shipped measurement sets (seed tables) and measurement-set YAML files
  families         model families: config keys → ModelSpec fields (used by both model readers)
  hf_config        a Hugging Face config.json → ModelSpec
  gguf_file        the GGUF binary header (metadata, tensor names)
  gguf_reader      GGUF metadata → ModelSpec (through the families)
  run_reports      RUN/run_report.json → Measurement (calibration from the user's runs)
  measurement_csv  CSV files of measurements → Measurement (and the architecture each row names)
  csv_template     the calibration CSV template (header and legend from the schemas)
  model_source     a MODEL (catalog name, repo id, config.json, model directory, .gguf) → ModelSpec and weights
  user_config      the user's config directory and calibration file
  prices           GPU-hour price tables: shipped (cited, dated), the user's file, --price
  shipped_cache    the parsed shipped YAML kept as JSON in the user cache directory (cold start)
"""
