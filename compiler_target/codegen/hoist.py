"""Subexpressions of an elementwise expression that vary along fewer dims than its
iteration space: computed once on their own, smaller box and read back broadcast.

A squeeze-and-excitation block's scale is `x · hardsigmoid(s + b)`, with `s` and `b`
one value per channel: of its four vector passes over the tile, three depend on the
channel only. Hoisted, they run over the tile's channels (a box of c x 1) and the
multiply reads their result with stride 0 along the other dims, so the vector engine
does one pass over the tile instead of four. The values, and so the bits, are the same:
each hoisted node computes the same operation on the same operands.
"""
from dataclasses import dataclass

from .ops import LEAVES, live_nodes


@dataclass(frozen=True)
class Hoisted:
    """A node of the expression computed apart: `expr` is its subexpression (the node
    last, input indices unchanged), `dims` the iteration dims its value varies along."""
    node: int
    expr: list
    dims: frozenset[int]


def node_dims(expr, input_dims: dict[int, frozenset[int]]) -> list[frozenset[int]]:
    """Per node, the dims its value varies along: an input's (`input_dims`), none for a
    scalar, the union of its operands' for an operation."""
    dims: list[frozenset[int]] = []
    for node in expr:
        if node[0] == "input":
            dims.append(input_dims[node[1]])
        elif node[0] in LEAVES:
            dims.append(frozenset())
        else:
            dims.append(frozenset().union(*(dims[a] for a in node[1])))
    return dims


def hoist(expr, input_dims: dict[int, frozenset[int]], first_input: int):
    """(main expression, hoisted nodes): every operation whose value varies along fewer
    dims than a node that reads it is hoisted, and the main expression reads hoisted
    node j as input(first_input + j) instead (nodes only hoisted ones read are dropped).
    Without broadcast inputs only an operation on scalars alone could be (computed on
    one element); every other node varies along the same dims."""
    dims = node_dims(expr, input_dims)
    hoisted: list[Hoisted] = []
    replaced = {}
    for index, node in enumerate(expr):
        if node[0] in LEAVES:
            continue
        for a in node[1]:
            if a not in replaced and expr[a][0] not in LEAVES and dims[a] < dims[index]:
                replaced[a] = ("input", first_input + len(hoisted))
                hoisted.append(Hoisted(a, live_nodes(expr, a), dims[a]))
    if not hoisted:
        return expr, []
    main = live_nodes([replaced.get(i, node) for i, node in enumerate(expr)])
    return main, hoisted
