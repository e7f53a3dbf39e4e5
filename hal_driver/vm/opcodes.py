"""The VM bytecode instruction set of IREE 3.13 (bytecode version 17.0).

Our own table, written from the facts of IREE's VMOpcodes*.td / isa.json. Each line
is `opcode mnemonic operand-fields...`; an instruction is its opcode byte (extension
instructions: a prefix byte 0xE0 / 0xE1, then their opcode byte) followed by its
fields in order. Field kinds:

  i f      i32 / f32 register (u16)          I F   i64 / f64 register: even ordinal
  r        ref register, move bit not allowed R     ref register, move bit 0x4000 allowed
  g4 g8    global byte offset (u32) accessing 4 / 8 bytes        gr  global ref ordinal (u32)
  k4 k8    i32 / i64 immediate              kf kF  f32 / f64 immediate
  ro       rodata ordinal (u32)   ty  type ordinal (u32)   fn  function ordinal (u32,
           bit 0x80000000 = import)          s   string (u16 length + bytes)
  Li LI Lf LF Lr La   register list of i32/i64/f32/f64/ref/any registers; Lc: u16 counts
           (u16 count + u16 each; 2-byte aligned relative to the function start)
  b        branch target: bytecode offset (u32) of a block marker
  m        branch register remap list (u16 count + (src,dst) u16 pairs; aligned)
  T        branch table: u16 case count, then per case `b m`
"""
from dataclasses import dataclass

# Register and function-ordinal encoding of the operands above.
REF_TYPE_BIT = 0x8000      # a register operand names a ref register
REF_MOVE_BIT = 0x4000      # ... whose value is moved out (cleared after it is read)
REF_MASK = 0x3FFF          # the register ordinal
IMPORT_BIT = 0x80000000    # a function ordinal names an import

BLOCK_MARKER = 0x79
PREFIX_EXT_F32 = 0xE0
PREFIX_EXT_F64 = 0xE1

FEATURE_EXT_F32 = 1 << 0
FEATURE_EXT_F64 = 1 << 1
FEATURE_YIELD = 1 << 2
FEATURE_UNWIND = 1 << 3
SUPPORTED_FEATURES = FEATURE_EXT_F32 | FEATURE_EXT_F64 | FEATURE_YIELD | FEATURE_UNWIND

BYTECODE_VERSION_MAJOR = 17
BYTECODE_VERSION_MINOR = 0

_CORE = """
00 global.load.i32 g4 i
01 global.store.i32 g4 i
02 global.load.indirect.i32 i i
03 global.store.indirect.i32 i i
04 global.load.i64 g8 I
05 global.store.i64 g8 I
06 global.load.indirect.i64 i I
07 global.store.indirect.i64 i I
08 global.load.ref gr ty R
09 global.store.ref gr ty R
0A global.load.indirect.ref i ty R
0B global.store.indirect.ref i ty R
0C const.i32.zero i
0D const.i32 k4 i
0E const.i64.zero I
0F const.i64 k8 I
10 const.ref.zero R
11 const.ref.rodata ro R
12 list.alloc ty i R
13 list.reserve r i
14 list.size r i
15 list.resize r i
16 list.get.i32 r i i
17 list.set.i32 r i i
18 list.get.i64 r i I
19 list.set.i64 r i I
1A list.get.ref r i ty R
1B list.set.ref r i R
1C select.i32 i i i i
1D select.i64 i I I I
1E select.ref i ty R R R
1F switch.i32 i i Li i
20 switch.i64 i I LI I
21 switch.ref i ty R Lr R
22 add.i32 i i i
23 sub.i32 i i i
24 mul.i32 i i i
25 div.i32.s i i i
26 div.i32.u i i i
27 rem.i32.s i i i
28 rem.i32.u i i i
29 fma.i32 i i i i
2A add.i64 I I I
2B sub.i64 I I I
2C mul.i64 I I I
2D div.i64.s I I I
2E div.i64.u I I I
2F rem.i64.s I I I
30 rem.i64.u I I I
31 fma.i64 I I I I
32 not.i32 i i
33 and.i32 i i i
34 or.i32 i i i
35 xor.i32 i i i
36 not.i64 I I
37 and.i64 I I I
38 or.i64 I I I
39 xor.i64 I I I
3A shl.i32 i i i
3B shr.i32.s i i i
3C shr.i32.u i i i
3D shl.i64 I i I
3E shr.i64.s I i I
3F shr.i64.u I i I
40 trunc.i32.i8 i i
41 trunc.i32.i16 i i
42 trunc.i64.i32 I i
43 ext.i8.i32.s i i
44 ext.i8.i32.u i i
45 ext.i16.i32.s i i
46 ext.i16.i32.u i i
47 ext.i32.i64.s i I
48 ext.i32.i64.u i I
49 cmp.eq.i32 i i i
4A cmp.ne.i32 i i i
4B cmp.lt.i32.s i i i
4C cmp.lt.i32.u i i i
4D cmp.nz.i32 i i
4E cmp.eq.i64 I I i
4F cmp.ne.i64 I I i
50 cmp.lt.i64.s I I i
51 cmp.lt.i64.u I I i
52 cmp.nz.i64 I i
53 cmp.eq.ref r r i
54 cmp.ne.ref r r i
55 cmp.nz.ref r i
56 br b m
57 cond_br i b m b m
58 call fn La La
59 call.variadic fn Lc La La
5A return La
5B fail i s
5C import_resolved fn i
5D yield b m
5E trace s La
5F print s La
60 cond_break i b m
61 break b m
62 buffer.load.i8.u r I i
63 buffer.load.i8.s r I i
64 buffer.load.i16.u r I i
65 buffer.load.i16.s r I i
66 buffer.load.i32 r I i
67 buffer.load.i64 r I I
68 buffer.store.i8 r I i
69 buffer.store.i16 r I i
6A buffer.store.i32 r I i
6B buffer.store.i64 r I I
6C buffer.alloc I i R
6D buffer.clone r I I i R
6E buffer.length r I
6F buffer.copy r I r I I
70 buffer.compare r I r I I i
71 buffer.fill.i8 r I I i
72 buffer.fill.i16 r I I i
73 buffer.fill.i32 r I I i
74 buffer.fill.i64 r I I I
75 ctlz.i32 i i
76 ctlz.i64 I I
77 abs.i32 i i
78 abs.i64 I I
79 block
7A min.i32.s i i i
7B min.i32.u i i i
7C max.i32.s i i i
7D max.i32.u i i i
7E min.i64.s I I I
7F min.i64.u I I I
80 max.i64.s I I I
81 max.i64.u I I I
82 cast.any.ref R ty R
83 br_table i b m T
84 buffer.hash r I I I
85 discard.refs Lr
86 assign.ref R R
87 call.yieldable fn La b La
88 call.variadic.yieldable fn Lc La b La
"""

_EXT_F32 = """
00 global.load.f32 g4 f
01 global.store.f32 g4 f
02 global.load.indirect.f32 i f
03 global.store.indirect.f32 i f
04 const.f32.zero f
05 const.f32 kf f
06 list.get.f32 r i f
07 list.set.f32 r i f
08 select.f32 i f f f
09 switch.f32 i f Lf f
0A add.f32 f f f
0B sub.f32 f f f
0C mul.f32 f f f
0D div.f32 f f f
0E rem.f32 f f f
0F fma.f32 f f f f
10 abs.f32 f f
11 neg.f32 f f
12 ceil.f32 f f
13 floor.f32 f f
14 cast.si32.f32 i f
15 cast.ui32.f32 i f
16 cast.f32.si32 f i
17 cast.f32.ui32 f i
18 bitcast.i32.f32 i f
19 bitcast.f32.i32 f i
1A atan.f32 f f
1B atan2.f32 f f f
1C cos.f32 f f
1D sin.f32 f f
1E exp.f32 f f
1F exp2.f32 f f
20 expm1.f32 f f
21 log.f32 f f
22 log10.f32 f f
23 log1p.f32 f f
24 log2.f32 f f
25 pow.f32 f f f
26 rsqrt.f32 f f
27 sqrt.f32 f f
28 tanh.f32 f f
29 erf.f32 f f
2A cmp.eq.f32.o f f i
2B cmp.eq.f32.u f f i
2C cmp.ne.f32.o f f i
2D cmp.ne.f32.u f f i
2E cmp.lt.f32.o f f i
2F cmp.lt.f32.u f f i
30 cmp.lte.f32.o f f i
31 cmp.lte.f32.u f f i
32 cmp.nan.f32 f i
33 buffer.load.f32 r I f
34 buffer.store.f32 r I f
35 buffer.fill.f32 r I I f
36 round.f32 f f
37 min.f32 f f f
38 max.f32 f f f
39 round.f32.even f f
3A cast.f32.si64 f I
3B cast.f32.ui64 f I
3C cast.si64.f32 I f
3D cast.ui64.f32 I f
"""

_EXT_F64 = """
00 global.load.f64 g8 F
01 global.store.f64 g8 F
02 global.load.indirect.f64 i F
03 global.store.indirect.f64 i F
04 const.f64.zero F
05 const.f64 kF F
06 list.get.f64 r i F
07 list.set.f64 r i F
08 select.f64 i F F F
09 switch.f64 i F LF F
0A add.f64 F F F
0B sub.f64 F F F
0C mul.f64 F F F
0D div.f64 F F F
0E rem.f64 F F F
0F fma.f64 F F F F
10 abs.f64 F F
11 neg.f64 F F
12 ceil.f64 F F
13 floor.f64 F F
14 trunc.f64.f32 F f
15 ext.f32.f64 f F
16 cast.si32.f64 i F
17 cast.ui32.f64 i F
18 cast.f64.si32 F i
19 cast.f64.ui32 F i
1A cast.si64.f64 I F
1B cast.ui64.f64 I F
1C cast.f64.si64 F I
1D cast.f64.ui64 F I
1E bitcast.i64.f64 I F
1F bitcast.f64.i64 F I
20 atan.f64 F F
21 atan2.f64 F F F
22 cos.f64 F F
23 sin.f64 F F
24 exp.f64 F F
25 exp2.f64 F F
26 expm1.f64 F F
27 log.f64 F F
28 log10.f64 F F
29 log1p.f64 F F
2A log2.f64 F F
2B pow.f64 F F F
2C rsqrt.f64 F F
2D sqrt.f64 F F
2E tanh.f64 F F
2F erf.f64 F F
30 cmp.eq.f64.o F F i
31 cmp.eq.f64.u F F i
32 cmp.ne.f64.o F F i
33 cmp.ne.f64.u F F i
34 cmp.lt.f64.o F F i
35 cmp.lt.f64.u F F i
36 cmp.lte.f64.o F F i
37 cmp.lte.f64.u F F i
38 cmp.nan.f64 F i
39 buffer.load.f64 r I F
3A buffer.store.f64 r I F
3B buffer.fill.f64 r I I F
3C round.f64 F F
3D min.f64 F F F
3E max.f64 F F F
3F round.f64.even F F
"""


@dataclass(frozen=True)
class OpInfo:
    mnemonic: str
    fields: tuple
    feature: int  # FEATURE_* bit the enclosing function must declare, or 0


def _parse(table: str, feature: int) -> dict:
    ops = {}
    for line in table.strip().splitlines():
        code, mnemonic, *fields = line.split()
        ops[int(code, 16)] = OpInfo(mnemonic, tuple(fields), feature)
    return ops


CORE_OPS = _parse(_CORE, 0)
EXT_F32_OPS = _parse(_EXT_F32, FEATURE_EXT_F32)
EXT_F64_OPS = _parse(_EXT_F64, FEATURE_EXT_F64)
PREFIXED_OPS = {PREFIX_EXT_F32: EXT_F32_OPS, PREFIX_EXT_F64: EXT_F64_OPS}
