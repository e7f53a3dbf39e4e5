"""3-D convolutions rewritten at the end of the `input` phase as 2-D ones, which the NPU
runs (its MAC array's conv2d has two windowed dims).

An ONNX Conv over (N, C, D, H, W) reaches the input phase as
`linalg.conv_3d_ncdhw_fcdhw` of the padded input. For each output depth d, its depth
taps kd read the input slices d·sd + kd·dd: stacked as channels, they make a 2-D
convolution with KD·C input channels over the (H, W) plane, and the output depths a
batch of them:

    x[n, d, kd, c, h, w] = in[n, c, d·sd + kd·dd, h, w]          (N, Do, KD, C, Hp, Wp)
    out[n·Do + d] = conv_2d_nchw_fchw(x[n·Do + d] as (KD·C, Hp, Wp),
                                      w transposed to (F, KD, C, KH, KW) as (F, KD·C, KH, KW))

transposed back to (N, F, Do, Ho, Wo). The stacked input is a copy KD times the input's
size (a dispatch of its own, on the NPU's DMA; with one depth tap IREE may fold it into
the conv's reads); the weights' transpose is folded by IREE's const-eval. Only static shapes are rewritten; a dynamic 3-D convolution stays on
the host.
"""
from iree.compiler import ir

from compiler_target.program_functions import clone_before, function_blocks

_CONV_3D = "linalg.conv_3d_ncdhw_fcdhw"


def rewrite_3d_convolutions(module) -> int:
    """Rewrites every static `linalg.conv_3d_ncdhw_fcdhw` of `module` (a module
    operation, in place) as a 2-D convolution; returns how many."""
    count = 0
    for block in function_blocks(module):
        for op in list(block.operations):
            if op.operation.name == _CONV_3D and _rewrite(op.operation, module.context):
                count += 1
    return count


def _rewrite(op, context) -> bool:
    types = [ir.RankedTensorType(v.type) for v in (*op.operands[:3], op.results[0])]
    if any(not t.has_static_shape for t in types):
        return False
    text = _stacked_function(*(_shape_and_element(t) for t in types),
                             _vector(op, "strides"), _vector(op, "dilations"))
    replacement = clone_before(op, ir.Module.parse(text, context), list(op.operands[:3]))
    op.results[0].replace_all_uses_with(replacement)
    op.erase()
    return True


def _shape_and_element(tensor_type) -> tuple[list[int], str]:
    return list(tensor_type.shape), str(tensor_type.element_type)


def _vector(op, name: str) -> list[int]:
    if name not in op.attributes:
        return [1, 1, 1]
    return [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]


def _stacked_function(image, weights, init, result, strides, dilations) -> str:
    """A func.func(image, weights, init) computing the 3-D convolution as the 2-D one."""
    (n, c, dp, hp, wp), in_element = image
    (f, _, kd, kh, kw), w_element = weights
    (_, _, do, ho, wo), out_element = result
    sd, sh, sw = strides
    dd, dh, dw = dilations
    tensor = _tensor_type
    stacked = tensor([n, do, kd, c, hp, wp], in_element)
    planes = tensor([n * do, kd * c, hp, wp], in_element)
    filters = tensor([f, kd, c, kh, kw], w_element)
    flat_filters = tensor([f, kd * c, kh, kw], w_element)
    by_depth = tensor([n, do, f, ho, wo], out_element)
    flat_out = tensor([n * do, f, ho, wo], out_element)
    # Several depth taps: the copy stacks them, kept as it is (with one input channel
    # IREE would fold it into a conv with three windowed dims again). One: the copy
    # only reorders the input, and IREE may fold it into the conv's reads.
    barrier = f"%kept = util.optimization_barrier %x : {stacked}" if kd > 1 else \
        f"%kept = tensor.cast %x : {stacked} to {stacked}"
    return f"""
func.func @f(%image: {tensor(image[0], in_element)}, %weights: {tensor(weights[0], w_element)},
             %init: {tensor(init[0], init[1])}) -> {tensor(result[0], out_element)} {{
  %x0 = tensor.empty() : {stacked}
  %x = linalg.generic {{indexing_maps = [
      affine_map<(n, d, k, c, h, w) -> (n, c, d * {sd} + k * {dd}, h, w)>,
      affine_map<(n, d, k, c, h, w) -> (n, d, k, c, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}}
      ins(%image : {tensor(image[0], in_element)}) outs(%x0 : {stacked}) {{
  ^bb0(%in: {in_element}, %out: {in_element}):
    linalg.yield %in : {in_element}
  }} -> {stacked}
  {barrier}
  %planes = tensor.collapse_shape %kept [[0, 1], [2, 3], [4], [5]] : {stacked} into {planes}
  %w0 = tensor.empty() : {filters}
  %wt = linalg.transpose ins(%weights : {tensor(weights[0], w_element)}) outs(%w0 : {filters})
      permutation = [0, 2, 1, 3, 4]
  %filters = tensor.collapse_shape %wt [[0], [1, 2], [3], [4]] : {filters} into {flat_filters}
  %i0 = tensor.empty() : {by_depth}
  %it = linalg.transpose ins(%init : {tensor(init[0], init[1])}) outs(%i0 : {by_depth})
      permutation = [0, 2, 1, 3, 4]
  %inits = tensor.collapse_shape %it [[0, 1], [2], [3], [4]] : {by_depth} into {flat_out}
  %sums = linalg.conv_2d_nchw_fchw {{dilations = dense<[{dh}, {dw}]> : vector<2xi64>,
                                     strides = dense<[{sh}, {sw}]> : vector<2xi64>}}
      ins(%planes, %filters : {planes}, {flat_filters}) outs(%inits : {flat_out}) -> {flat_out}
  %s = tensor.expand_shape %sums [[0, 1], [2], [3], [4]] output_shape [{n}, {do}, {f}, {ho}, {wo}]
      : {flat_out} into {by_depth}
  %o0 = tensor.empty() : {tensor(result[0], out_element)}
  %o = linalg.transpose ins(%s : {by_depth}) outs(%o0 : {tensor(result[0], out_element)})
      permutation = [0, 2, 1, 3, 4]
  return %o : {tensor(result[0], out_element)}
}}"""


def _tensor_type(shape, element: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"
