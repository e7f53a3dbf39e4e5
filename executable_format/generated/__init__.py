"""flatc output for schemas/npu_executable.fbs; never edit it, regenerate it
(command in the schema header and docs/npu-fb-format.md)."""
