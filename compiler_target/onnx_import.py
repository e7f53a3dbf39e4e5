"""ONNX → torch-dialect MLIR module, in process, with the importer shipped in
iree-base-compiler (the same steps as `iree-import-onnx`: load, check, infer shapes,
import the main graph), refusing what that importer would compile into a different
function (`_check_importable`)."""
import onnx
from onnx import numpy_helper

from iree.compiler import ir
from iree.compiler.extras import onnx_importer

from compiler_target.errors import CompileError


def import_onnx_file(path: str, context):
    """Returns the module operation, built in `context` (the compiler session's). The
    importer creates ops of dialects nothing has loaded yet (torch), so all dialects are
    loaded first (0.04 s; MLIR inputs skip it)."""
    context.load_all_available_dialects()
    model = _load(path)
    _name_unnamed_nodes(model.graph)
    _check_importable(path, model.graph)
    model_info = onnx_importer.ModelInfo(model)
    module = model_info.create_module(context=context).operation
    try:
        onnx_importer.NodeImporter.define_function(model_info.main_graph, module).import_all()
    except Exception as e:  # the importer reports unsupported ONNX content by raising
        raise CompileError(f"{path}: ONNX import failed: {e}") from None
    try:
        module.verify()
    except ir.MLIRError as error:    # verify raises with the diagnostics
        diagnostics = " ".join(str(error).split())
        raise CompileError(f"{path}: imported ONNX module does not verify: {diagnostics}") \
            from None
    return module


def _check_importable(path: str, graph: onnx.GraphProto) -> None:
    _check_typed(path, graph)
    _check_lstm_peepholes(path, graph)


def _check_typed(path: str, graph: onnx.GraphProto) -> None:
    """A node of another domain than ONNX's (onnxruntime's contrib ops, com.microsoft.*)
    whose output another node reads but ONNX shape inference could not type: the
    importer gives that value no type (`!torch.none`), and the compile then fails at the
    node that reads it, naming that node. The error names the node that causes it."""
    typed = {value.name for value in (*graph.value_info, *graph.input, *graph.output)} | \
        {tensor.name for tensor in graph.initializer}
    read = {name for node in graph.node for name in node.input}
    for node in graph.node:
        if node.domain in ("", "ai.onnx"):
            continue
        untyped = [name for name in node.output if name in read and name not in typed]
        if untyped:
            raise CompileError(
                f"{path}: node '{node.name}' is {node.domain}.{node.op_type}, an operator "
                f"outside the ONNX standard whose output '{untyped[0]}' ONNX shape "
                "inference cannot type; the ONNX importer of iree-base-compiler 3.13.0 "
                "cannot lower it (an onnxruntime contrib op: export or quantize the model "
                "with standard ONNX operators)")


def _check_lstm_peepholes(path: str, graph: onnx.GraphProto) -> None:
    """The LSTM lowering of iree-base-compiler 3.13.0's importer leaves out the peephole
    weights (input 7, P): madmom's beats BLSTM then compiled, for the npu and for
    llvm-cpu alike, into a network whose cell states were off by up to 91 (onnxruntime
    agreed to 1e-5 with P zeroed). An LSTM whose P is not all zeros is an error rather
    than a wrong answer."""
    initializers = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type != "LSTM" or len(node.input) < 8 or not node.input[7]:
            continue
        peepholes = initializers.get(node.input[7])
        if peepholes is not None and not numpy_helper.to_array(peepholes).any():
            continue
        raise CompileError(
            f"{path}: LSTM node '{node.name}' has peephole weights (input P, "
            f"'{node.input[7]}'), which the ONNX importer of iree-base-compiler 3.13.0 does "
            "not apply: the compiled network would compute a different function")


def _name_unnamed_nodes(graph: onnx.GraphProto) -> None:
    """The importer locates each op at its node's name; unnamed nodes (common in
    hand-built models) get `<OpType>_<index>` so reports and dumps can say where a
    dispatch came from."""
    for index, node in enumerate(graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"


def _load(path: str) -> onnx.ModelProto:
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except FileNotFoundError:
        raise CompileError(f"cannot open input file '{path}': No such file or directory") from None
    except Exception as e:  # protobuf DecodeError, onnx ValidationError, ...
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CompileError(f"{path}: not a valid ONNX model: {first_line}") from None
