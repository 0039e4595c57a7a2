"""Prefect flows and the CLI: wiring only; the work lives in `tasks/`."""
