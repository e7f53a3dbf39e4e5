"""flatc output for schemas/bytecode_module_def.fbs (see README.md here; do not edit)."""
