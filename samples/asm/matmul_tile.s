# matmul_tile.s -- a hand-written NPU program: out = relu6(A . B + bias), f32.
#
#   A     binding 0 (read-only)  [M=32][K=128]   16384 bytes, row-major
#   B     binding 1 (read-only)  [K=128][N=64]   32768 bytes, row-major
#   bias  binding 2 (read-only)  [N=64]            256 bytes
#   out   binding 3              [M=32][N=64]     8192 bytes
#
# The reduction (K) is split into two chunks of 64 so the second chunk loads while the
# MAC array multiplies the first: the first matmul starts the accumulator from the bias
# (flags=bias), the second adds to it (flags=accumulate). The vector unit then clamps to
# [0, 6] (relu6) in place and dma_out stores the tile.
#
# SRAM layout (bytes):
#   A0    0x0000  32*64*4 = 8192    A[:, 0:64]   (row stride 64 elements in SRAM)
#   A1    0x2000           8192     A[:, 64:128]
#   B0    0x4000  64*64*4 = 16384   B[0:64, :]
#   B1    0x8000           16384    B[64:128, :]
#   BIAS  0xc000  64*4    = 256
#   OUT   0xc100  32*64*4 = 8192    (ends at 0xe100 = 57600 = .sram_bytes)
#
# Semaphores: 0 chunk 0 loaded, 1 chunk 1 loaded (dma_in); 2 product done (mac);
# 3 relu6 done (vector).
#
# matmul operands: a, b, out (and bias) are SRAM addresses; lda/ldb/ldo are row strides
# in elements. A k-chunk of A is a strided box: 32 rows of 64 elements, DRAM row stride 128.

.version 2.0

.export matmul_relu6_tile bindings=[ro:16384,ro:32768,ro:256,rw:8192] constant_count=0 workgroup_count=1x1x1
.dispatch_name "matmul_relu6_tile"
.source_location "samples/asm/matmul_tile.s"
.sram_bytes 57600

# --- chunk 0 and the bias (dma_in)
    dma.load.f32 binding=2, dram_offset=0, sram_addr=0xc000, n0=1, n1=1, n2=1, n3=64, dram_s0=0, dram_s1=0, dram_s2=0, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=0, sram_s3=1
    dma.load.f32 binding=0, dram_offset=0, sram_addr=0x0, n0=1, n1=1, n2=32, n3=64, dram_s0=0, dram_s1=0, dram_s2=128, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=64, sram_s3=1
    dma.load.f32 binding=1, dram_offset=0, sram_addr=0x4000, n0=1, n1=1, n2=64, n3=64, dram_s0=0, dram_s1=0, dram_s2=64, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=64, sram_s3=1
    signal engine=dma_in, sem=0
# --- chunk 1: A columns 64..127 start at byte 64*4 = 256, B rows 64..127 at 64*64*4 = 16384
    dma.load.f32 binding=0, dram_offset=256, sram_addr=0x2000, n0=1, n1=1, n2=32, n3=64, dram_s0=0, dram_s1=0, dram_s2=128, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=64, sram_s3=1
    dma.load.f32 binding=1, dram_offset=16384, sram_addr=0x8000, n0=1, n1=1, n2=64, n3=64, dram_s0=0, dram_s1=0, dram_s2=64, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=64, sram_s3=1
    signal engine=dma_in, sem=1

# --- mac: out = bias + A0 . B0 while chunk 1 loads, then out += A1 . B1
    wait engine=mac, sem=0, value=1
    matmul.f32 flags=bias, a=0x0, b=0x4000, out=0xc100, m=32, n=64, k=64, lda=64, ldb=64, ldo=64, bias=0xc000
    wait engine=mac, sem=1, value=1
    matmul.f32 flags=accumulate, a=0x2000, b=0x8000, out=0xc100, m=32, n=64, k=64, lda=64, ldb=64, ldo=64, bias=0x0
    signal engine=mac, sem=2

# --- vector: relu6 = clamp(x, 0, 6) in place, over 32 rows x 64 columns
    wait engine=vector, sem=2, value=1
    vclamp.f32 dst=0xc100, src=0xc100, n0=1, n1=32, n2=64, dst_s0=0, dst_s1=64, dst_s2=1, src_s0=0, src_s1=64, src_s2=1, p0=0.0, p1=6.0
    signal engine=vector, sem=3

# --- dma_out: store the tile
    wait engine=dma_out, sem=3, value=1
    dma.store.f32 binding=3, dram_offset=0, sram_addr=0xc100, n0=1, n1=1, n2=32, n3=64, dram_s0=0, dram_s1=0, dram_s2=64, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=64, sram_s3=1
    end
