"""Python API in the style of `iree.compiler.tools`:

    from compiler_target import api
    vmfb = api.compile_file("model.onnx", target_backends=["npu"])
    api.compile_str(mlir_text, target_backends=["npu"], extra_args=["--iree-npu-fallback=error"],
                    output_file="model.vmfb")

With "npu" among the targets the split pipeline runs in this process; other targets go
to the stock `iree.compiler.tools` unchanged. Process-wide LLVM flags (such as
`--mlir-print-ir-after-all`) can be given only to the first npu compile of a process.
"""
from iree.compiler import tools as stock_tools

from compiler_target import options as cli_options
from compiler_target import pipeline


def compile_file(path: str, target_backends=("npu",), extra_args=(), output_file=None):
    """Compiles an MLIR (text/bytecode) or .onnx file. Returns the vmfb bytes (or the IR at
    `--compile-to`), or None after writing them to `output_file`."""
    if "npu" not in target_backends:
        return stock_tools.compile_file(path, target_backends=list(target_backends),
                                        extra_args=list(extra_args), output_file=output_file)
    return _compile(pipeline.Source(path=str(path)), target_backends, extra_args, output_file)


def compile_str(text, target_backends=("npu",), extra_args=(), output_file=None):
    """Compiles MLIR text (str or bytes). Returns like compile_file."""
    if "npu" not in target_backends:
        return stock_tools.compile_str(text, target_backends=list(target_backends),
                                       extra_args=list(extra_args), output_file=output_file)
    if isinstance(text, bytes):
        text = text.decode()
    return _compile(pipeline.Source(text=text), target_backends, extra_args, output_file)


def _compile(source, target_backends, extra_args, output_file):
    backends = ",".join(target_backends)
    options = cli_options.parse([f"--iree-hal-target-backends={backends}", *extra_args])
    output = pipeline.compile_source(source, options)
    if output_file is None:
        return output
    with open(output_file, "wb") as f:
        f.write(output)
    return None
