# conv_tile.s -- a hand-written NPU program: y = relu(conv3x3(x, w) + bias), f32.
#
#   x  binding 0 (read-only)   [C=8][H=16][W=16]      8192 bytes, channel-major (CHW)
#   w  binding 1 (read-only)   [F=16][C=8][3][3]      4608 bytes
#   b  constant pool offset 0  [16]                     64 bytes (the .constants below)
#   y  binding 2               [F=16][16][16]        16384 bytes
#
# Stride 1, zero padding 1: every output row needs the input rows above and below it.
# The output is computed in 4 tiles of 4 rows. Tile t needs input rows 4t-1 .. 4t+4,
# i.e. a padded input tile in[8][6][18] (6 rows, 16 columns + a zero column each side).
# Two input buffers (IN0: tiles 0 and 2, IN1: tiles 1 and 3) and two accumulator buffers
# (OUT0, OUT1) let the DMA engines move one tile while the MAC array computes another.
#
# SRAM layout (byte addresses; every buffer is f32, so 4-byte aligned):
#   W     0x0000  16*8*3*3*4 = 4608     weights, loaded once
#   B     0x1200  16*4       =   64     bias, loaded once
#   IN0   0x1240  8*6*18*4   = 3456     padded input tile, channel stride 6*18 = 108
#   IN1   0x1fc0                3456
#   OUT0  0x2d40  16*4*16*4  = 4096     conv output tile [16][4][16]
#   OUT1  0x3d40                4096    (ends at 0x4d40 = 19776 = .sram_bytes)
#
# Semaphores (each signalled from one engine; wait N = "the N-th signal happened"):
#   0 IN0 full   1 IN1 full      (dma_in)    2 IN0 free   3 IN1 free   (mac)
#   4 OUT0 full  5 OUT1 full     (mac)       6 OUT0 done  7 OUT1 done  (vector)
#   8 OUT0 free  9 OUT1 free     (dma_out)
#
# Operands: DMA boxes are 4-D (n0..n3 counts, *_s0..s3 strides in elements, innermost
# last); here n1 = channels, n2 = rows, n3 = columns. DRAM offsets are in bytes.

.version 2.0
# bias = -1.0, -0.75, ..., 2.75 (16 f32, little-endian hex)
.constants hex 000080bf000040bf000000bf000080be000000000000803e0000003f0000403f
.constants hex 0000803f0000a03f0000c03f0000e03f00000040000010400000204000003040

.export conv3x3_relu_tile bindings=[ro:8192,ro:4608,rw:16384] constant_count=0 workgroup_count=1x1x1
.dispatch_name "conv3x3_relu_tile"
.source_location "samples/asm/conv_tile.s"
.sram_bytes 19776

# --- prologue (dma_in): zero both input buffers (the halo), load weights, bias, tiles 0 and 1
    fill.f32 sram_addr=0x1240, n0=1, n1=8, n2=6, n3=18, s0=0, s1=108, s2=18, s3=1, value=0.0
    fill.f32 sram_addr=0x1fc0, n0=1, n1=8, n2=6, n3=18, s0=0, s1=108, s2=18, s3=1, value=0.0
    dma.load.f32 binding=1, dram_offset=0, sram_addr=0x0, n0=1, n1=1, n2=1, n3=1152, dram_s0=0, dram_s1=0, dram_s2=0, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=0, sram_s3=1
    dma.load.f32 binding=const, dram_offset=0, sram_addr=0x1200, n0=1, n1=1, n2=1, n3=16, dram_s0=0, dram_s1=0, dram_s2=0, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=0, sram_s3=1
    # tile 0: input rows 0..4 -> IN0 rows 1..5, columns 1..16 (row 0 stays zero: top padding)
    #   sram_addr = IN0 + (1*18 + 1)*4 = 0x128c
    dma.load.f32 binding=0, dram_offset=0, sram_addr=0x128c, n0=1, n1=8, n2=5, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=108, sram_s2=18, sram_s3=1
    # a signal fires when its engine reaches it, i.e. after everything before it on dma_in
    signal engine=dma_in, sem=0
    # tile 1: input rows 3..8 -> IN1 rows 0..5 (dram_offset = 3*16*4 = 192)
    dma.load.f32 binding=0, dram_offset=192, sram_addr=0x1fc4, n0=1, n1=8, n2=6, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=108, sram_s2=18, sram_s3=1
    signal engine=dma_in, sem=1

# --- tile 0: mac (conv + bias) -> vector (relu in place) -> dma_out (output rows 0..3)
    wait engine=mac, sem=0, value=1
    conv2d.f32 flags=bias, in=0x1240, w=0x0, out=0x2d40, c=8, hi=6, wi=18, f=16, ho=4, wo=16, kh_kw=3x3, sh_sw=1x1, dh_dw=1x1, groups=1, bias=0x1200
    signal engine=mac, sem=2
    signal engine=mac, sem=4
    wait engine=vector, sem=4, value=1
    vrelu.f32 dst=0x2d40, src=0x2d40, n0=16, n1=4, n2=16, dst_s0=64, dst_s1=16, dst_s2=1, src_s0=64, src_s1=16, src_s2=1
    signal engine=vector, sem=6
    wait engine=dma_out, sem=6, value=1
    dma.store.f32 binding=2, dram_offset=0, sram_addr=0x2d40, n0=1, n1=16, n2=4, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=64, sram_s2=16, sram_s3=1
    signal engine=dma_out, sem=8

# --- refill IN0 with tile 2 (input rows 7..12) once the MAC array has read tile 0
    wait engine=dma_in, sem=2, value=1
    dma.load.f32 binding=0, dram_offset=448, sram_addr=0x1244, n0=1, n1=8, n2=6, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=108, sram_s2=18, sram_s3=1
    signal engine=dma_in, sem=0

# --- tile 1 (output rows 4..7) from IN1 into OUT1
    wait engine=mac, sem=1, value=1
    conv2d.f32 flags=bias, in=0x1fc0, w=0x0, out=0x3d40, c=8, hi=6, wi=18, f=16, ho=4, wo=16, kh_kw=3x3, sh_sw=1x1, dh_dw=1x1, groups=1, bias=0x1200
    signal engine=mac, sem=3
    signal engine=mac, sem=5
    wait engine=vector, sem=5, value=1
    vrelu.f32 dst=0x3d40, src=0x3d40, n0=16, n1=4, n2=16, dst_s0=64, dst_s1=16, dst_s2=1, src_s0=64, src_s1=16, src_s2=1
    signal engine=vector, sem=7
    wait engine=dma_out, sem=7, value=1
    dma.store.f32 binding=2, dram_offset=256, sram_addr=0x3d40, n0=1, n1=16, n2=4, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=64, sram_s2=16, sram_s3=1
    signal engine=dma_out, sem=9

# --- refill IN1 with tile 3: input rows 11..15 -> IN1 rows 0..4; row 5 still holds input
#     row 8 from tile 1, so zero it again (bottom padding): IN1 + 5*18*4 = 0x2128
    wait engine=dma_in, sem=3, value=1
    dma.load.f32 binding=0, dram_offset=704, sram_addr=0x1fc4, n0=1, n1=8, n2=5, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=108, sram_s2=18, sram_s3=1
    fill.f32 sram_addr=0x2128, n0=1, n1=8, n2=1, n3=18, s0=0, s1=108, s2=0, s3=1, value=0.0
    signal engine=dma_in, sem=1

# --- tile 2 (output rows 8..11): IN0 holds it (IN0 full #2), OUT0 must be stored (OUT0 free #1)
    wait engine=mac, sem=0, value=2
    wait engine=mac, sem=8, value=1
    conv2d.f32 flags=bias, in=0x1240, w=0x0, out=0x2d40, c=8, hi=6, wi=18, f=16, ho=4, wo=16, kh_kw=3x3, sh_sw=1x1, dh_dw=1x1, groups=1, bias=0x1200
    signal engine=mac, sem=4
    wait engine=vector, sem=4, value=2
    vrelu.f32 dst=0x2d40, src=0x2d40, n0=16, n1=4, n2=16, dst_s0=64, dst_s1=16, dst_s2=1, src_s0=64, src_s1=16, src_s2=1
    signal engine=vector, sem=6
    wait engine=dma_out, sem=6, value=2
    dma.store.f32 binding=2, dram_offset=512, sram_addr=0x2d40, n0=1, n1=16, n2=4, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=64, sram_s2=16, sram_s3=1

# --- tile 3 (output rows 12..15)
    wait engine=mac, sem=1, value=2
    wait engine=mac, sem=9, value=1
    conv2d.f32 flags=bias, in=0x1fc0, w=0x0, out=0x3d40, c=8, hi=6, wi=18, f=16, ho=4, wo=16, kh_kw=3x3, sh_sw=1x1, dh_dw=1x1, groups=1, bias=0x1200
    signal engine=mac, sem=5
    wait engine=vector, sem=5, value=2
    vrelu.f32 dst=0x3d40, src=0x3d40, n0=16, n1=4, n2=16, dst_s0=64, dst_s1=16, dst_s2=1, src_s0=64, src_s1=16, src_s2=1
    signal engine=vector, sem=7
    wait engine=dma_out, sem=7, value=2
    dma.store.f32 binding=2, dram_offset=768, sram_addr=0x3d40, n0=1, n1=16, n2=4, n3=16, dram_s0=0, dram_s1=256, dram_s2=16, dram_s3=1, sram_s0=0, sram_s1=64, sram_s2=16, sram_s3=1
    end
