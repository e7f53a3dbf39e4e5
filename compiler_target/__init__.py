"""The `npu` compiler target: `compile_file` / `compile_str` (see api.py) and the
`iree-compile` CLI (cli.py). The compiler is loaded on first use, so the CLI's stock
passthrough stays fast."""

__all__ = ["compile_file", "compile_str"]


def __getattr__(name: str):
    if name in __all__:
        from compiler_target import api
        return getattr(api, name)
    raise AttributeError(f"module 'compiler_target' has no attribute '{name}'")
