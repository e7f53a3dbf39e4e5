"""ONNX → torch-dialect MLIR module, in process, with the importer shipped in
iree-base-compiler (the same steps as `iree-import-onnx`: load, check, infer shapes,
import the main graph), rewriting into standard ops what that importer would compile
into a different function where the standard ops say the same thing
(`_rewrite_crd_blocks`), and refusing the rest (`_check_importable`)."""
import numpy as np
import onnx
from onnx import helper, numpy_helper

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
    model = _rewrite_crd_blocks(path, model)
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


def _rewrite_crd_blocks(path: str, model: onnx.ModelProto) -> onnx.ModelProto:
    """iree-base-compiler 3.13.0's importer lowers DepthToSpace and SpaceToDepth wrongly in
    mode CRD, for the npu and for llvm-cpu alike:
    - DepthToSpace splits the channels as mode DCR does, [N, b, b, C/b², H, W], in mode
      CRD too, then permutes them with CRD's transpose: a CRD node (PyTorch's
      PixelShuffle, a text detector's upsampling head) computed a shuffle of the wrong
      channels (relative error 1-2 against onnxruntime);
    - SpaceToDepth (mode since opset 28) computes mode DCR whatever the mode.
    Each CRD node, in the main graph or a subgraph, is replaced by the ONNX spec's
    definition of it (`_crd_as_reshapes`), under the node's input and output names; DCR
    nodes, which the importer computes right, stay. Shape inference then types the new
    values. Returns the model, a new one if anything was rewritten."""
    types = _value_types(model.graph)
    names = _value_names(model.graph)
    rewritten = False
    for graph in _graphs(model.graph):
        nodes = []
        for node in graph.node:
            if node.op_type in ("DepthToSpace", "SpaceToDepth") and \
                    node.domain in ("", "ai.onnx") and \
                    _attribute(node, "mode", b"DCR") == b"CRD":
                nodes += _crd_as_reshapes(path, node, types.get(node.input[0]), names)
            else:
                nodes.append(node)
        if len(nodes) != len(graph.node):
            rewritten = True
            del graph.node[:]
            graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(model, data_prop=True) if rewritten else model


def _crd_as_reshapes(path: str, node: onnx.NodeProto, input_type: onnx.TypeProto | None,
                     names: set[str]) -> list[onnx.NodeProto]:
    """A CRD node as the ONNX spec defines it: Reshape, Transpose, Reshape
    (`_crd_shapes`). New values and nodes are named `<node>/<op>` (a subgraph's node
    may be unnamed: `<op type>/<op>`), made unique against `names`."""
    split, perm, merged = _crd_shapes(path, node, _dims(input_type))
    nodes = _NodeSequence(node.name or node.op_type, node.input[0], names)
    grouped = nodes.add("Reshape", [node.input[0], nodes.shape(split)])
    shuffled = nodes.add("Transpose", [grouped], perm=perm)
    nodes.add("Reshape", [shuffled, nodes.shape(merged)], output=node.output[0])
    return nodes.nodes


def _crd_shapes(path: str, node: onnx.NodeProto, dims: list[int | None]):
    """(first shape, transpose perm, second shape) of a CRD node, for block size b:
    - DepthToSpace: [N, C/b², b, b, H, W], [0, 1, 4, 2, 5, 3], [N, C/b², H*b, W*b];
    - SpaceToDepth: [N, C, H/b, b, W/b, b], [0, 1, 3, 5, 2, 4], [N, C*b², H/b, W/b].
    Sizes shape inference knows are ints. An unknown N is Reshape's 0 (the input's) and
    an unknown C its -1 (inferred); DepthToSpace's unknown H or W is (dim, b), the
    input's dim from its Shape times b (dividing a Shape, IREE 3.13.0 read the quotient
    back from the device). SpaceToDepth with an unknown H or W, which would need H/b, is
    refused: the importer's own lowering does not compile it in mode DCR either."""
    b = _attribute(node, "blocksize", None)
    n, c, h, w = dims if len(dims) == 4 else [None] * 4
    n = n if n is not None else 0
    if node.op_type == "DepthToSpace":
        groups = c // (b * b) if c is not None else -1

        def size(known, dim, factor):
            return known * factor if known is not None else (dim, factor)

        return ([n, groups, b, b, size(h, 2, 1), size(w, 3, 1)], [0, 1, 4, 2, 5, 3],
                [n, groups, size(h, 2, b), size(w, 3, b)])
    if h is None or w is None:
        named = f"'{node.name}'" if node.name else f"of output '{node.output[0]}'"
        raise CompileError(
            f"{path}: SpaceToDepth node {named} has mode CRD, which the ONNX importer "
            "of iree-base-compiler 3.13.0 computes as mode DCR, and an input whose height "
            "or width ONNX shape inference cannot tell, so it cannot be rewritten into "
            "Reshape and Transpose (export the model with a static image size)")
    return ([n, c if c is not None else -1, h // b, b, w // b, b], [0, 1, 3, 5, 2, 4],
            [n, c * b * b if c is not None else -1, h // b, w // b])


class _NodeSequence:
    """New nodes replacing `node_name`'s, in order, named `<node_name>/<op>`."""

    def __init__(self, node_name: str, input_name: str, names: set[str]):
        self.node_name, self.input_name, self.names = node_name, input_name, names
        self.nodes: list[onnx.NodeProto] = []
        self.input_shape = None

    def add(self, op_type: str, inputs: list[str], output: str | None = None,
            **attributes) -> str:
        name = _unique_name(f"{self.node_name}/{op_type.lower()}", self.names)
        self.nodes.append(helper.make_node(op_type, inputs, [output or name], name=name,
                                           **attributes))
        return output or name

    def constant(self, values: list[int]) -> str:
        return self.add("Constant", [],
                        value=numpy_helper.from_array(np.array(values, np.int64)))

    def shape(self, sizes: list) -> str:
        """A 1-D int64 tensor of `sizes`: ints, or (dim, factor) for the input's dim
        times factor. A run of ints is one Constant, a run of consecutive dims one Slice
        of the input's Shape (times a Constant)."""
        runs: list[list] = []
        for size in sizes:
            last = runs[-1][-1] if runs else None
            if runs and isinstance(size, int) == isinstance(last, int) and \
                    (isinstance(size, int) or size[0] == last[0] + 1):
                runs[-1].append(size)
            else:
                runs.append([size])
        tensors = [self.constant(run) if isinstance(run[0], int) else self._input_dims(run)
                   for run in runs]
        return tensors[0] if len(tensors) == 1 else self.add("Concat", tensors, axis=0)

    def _input_dims(self, run: list[tuple[int, int]]) -> str:
        if self.input_shape is None:
            self.input_shape = self.add("Shape", [self.input_name])
        first = run[0][0]
        dims = self.add("Slice", [self.input_shape, self.constant([first]),
                                  self.constant([first + len(run)])])
        factors = [factor for _, factor in run]
        if all(factor == 1 for factor in factors):
            return dims
        return self.add("Mul", [dims, self.constant(factors)])


def _graphs(graph: onnx.GraphProto):
    """The graph and, depth first, every subgraph of its nodes (If, Loop, Scan bodies)."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in (*([attribute.g] if attribute.HasField("g") else []),
                             *attribute.graphs):
                yield from _graphs(subgraph)


def _value_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """Every typed value's type, in the graph and its subgraphs (ONNX names are unique
    across scopes)."""
    types = {}
    for g in _graphs(graph):
        for tensor in g.initializer:
            types[tensor.name] = helper.make_tensor_type_proto(tensor.data_type, tensor.dims)
        for value in (*g.value_info, *g.input, *g.output):
            types[value.name] = value.type
    return types


def _value_names(graph: onnx.GraphProto) -> set[str]:
    """Every value and node name in the graph and its subgraphs."""
    names = set()
    for g in _graphs(graph):
        names.update(t.name for t in g.initializer)
        names.update(v.name for v in (*g.value_info, *g.input, *g.output))
        for node in g.node:
            names.update((node.name, *node.input, *node.output))
    return names


def _unique_name(name: str, names: set[str]) -> str:
    unique, n = name, 1
    while unique in names:
        unique, n = f"{name}_{n}", n + 1
    names.add(unique)
    return unique


def _dims(value_type: onnx.TypeProto | None) -> list[int | None]:
    """A tensor type's dims, None for each one shape inference does not know; [] if it
    does not know the rank."""
    if value_type is None or not value_type.tensor_type.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else None
            for d in value_type.tensor_type.shape.dim]


def _attribute(node: onnx.NodeProto, name: str, default):
    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


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
