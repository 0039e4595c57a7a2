"""Pipeline stages: each subpackage is one stage with a typed config, an Arrow schema and pure functions."""
