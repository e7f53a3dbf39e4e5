"""Small valid programs and executables the format tests start from."""
from executable_format.builder import READ_ONLY, ExecutableBuilder, ProgramBuilder

ELEMENTS = 32                        # one 4x8 f32 tile
TILE_BYTES = ELEMENTS * 4


def dma(p: ProgramBuilder, op: str, binding, sram_addr: int, dram_offset: int = 0,
        dtype: str = "f32", rows: int = 4, cols: int = 8) -> int:
    """A dense rows x cols copy between DRAM and SRAM."""
    return p.emit(op, dtype=dtype, binding=binding, dram_offset=dram_offset,
                  sram_addr=sram_addr, n0=1, n1=1, n2=rows, n3=cols,
                  dram_s0=0, dram_s1=0, dram_s2=cols, dram_s3=1,
                  sram_s0=0, sram_s1=0, sram_s2=cols, sram_s3=1)


def unary(p: ProgramBuilder, op: str, dst: int, src: int, rows: int = 4, cols: int = 8,
          **params) -> int:
    return p.emit(op, dst=dst, src=src, n0=1, n1=rows, n2=cols, dst_s0=0, dst_s1=cols,
                  dst_s2=1, src_s0=0, src_s1=cols, src_s2=1, **params)


def relu_program(extra=None, sram_bytes: int | None = None, load_binding: int = 0,
                 store_binding: int = 1) -> ProgramBuilder:
    """load binding 0 -> relu -> store binding 1, synchronised with semaphores 0 and 1.
    `extra(p)` may emit instructions just before the final end."""
    p = ProgramBuilder(sram_bytes)
    dma(p, "dma.load", load_binding, sram_addr=0)
    p.emit("signal", engine="dma_in", sem=0)
    p.emit("wait", engine="vector", sem=0, value=1)
    unary(p, "vrelu", dst=TILE_BYTES, src=0)
    p.emit("signal", engine="vector", sem=1)
    p.emit("wait", engine="dma_out", sem=1, value=1)
    dma(p, "dma.store", store_binding, sram_addr=TILE_BYTES)
    if extra is not None:
        extra(p)
    p.end()
    return p


def relu_executable(program: ProgramBuilder | None = None, verify: bool = True,
                    **builder_args) -> bytes:
    b = ExecutableBuilder(**builder_args)
    b.add_constants(bytes(range(256)))
    b.add_export("relu", bindings=[(READ_ONLY, TILE_BYTES), (0, TILE_BYTES)],
                 program=program or relu_program(),
                 debug=dict(dispatch_name="relu_dispatch_0", source_location="model.onnx:3",
                            npu_ir="npu.relu"))
    return b.finish(verify_output=verify)


def relu_view_executable(views=((0, 0, TILE_BYTES), (1, 1, TILE_BYTES)), extra=None,
                         verify: bool = True) -> bytes:
    """relu from view 0 (binding 0 at push constant 0) to view 1 (binding 1 at push
    constant 1): the program addresses them as bindings 2 and 3."""
    b = ExecutableBuilder()
    b.add_export("relu", bindings=[(READ_ONLY, 0), (0, 0)], views=views, constant_count=2,
                 program=relu_program(extra, load_binding=2, store_binding=3))
    return b.finish(verify_output=verify)
