"""Vocabulary of the npu-fb assembly text shared by asm.py (parse) and disasm.py (print).

docs/npu-fb-format.md describes the syntax. Field values by kind:
  binding         `const` or an index          engine      dma_in | dma_out | mac | vector
  src_dtype       a dtype name                 pairs       `3x3` (low x high)
  p0, p1, scale   f32 literal (hex bits: NaN)  fill value  number of the dtype (hex bits: NaN)
  SRAM addresses  hex when printed             others      decimal (hex accepted)
"""
import json
import re

from .isa import DTYPE_NAMES, ENGINE_NAMES, Engine

COMMENT = "#"
INDENT = "    "
CONSTANTS_PER_LINE = 32                 # bytes per `.constants hex` line when printed
BINDING_FLAG_NAMES = {"ro": 1, "rw": 0}  # flags of `bindings=[ro:4096,rw:128]`
DEBUG_DIRECTIVES = ("dispatch_name", "source_location", "npu_ir")
ROOFLINE_KEYS = ("macs", "dtype", "read", "write")      # `.roofline macs=N, dtype=f32, ...`
CONSTANT_KINDS = ("hex", "f32", "f16", "bf16", "i8", "i32", "u8")
BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.$-]*")   # export names printed without quotes
SIGNAL_ENGINES = {ENGINE_NAMES[e]: int(e)
                  for e in (Engine.DMA_IN, Engine.DMA_OUT, Engine.MAC, Engine.VECTOR)}
DTYPES_BY_NAME = {name: int(dtype) for dtype, name in DTYPE_NAMES.items()}


def quote(text: str) -> str:
    """A one-line string literal (JSON escapes)."""
    return json.dumps(text, ensure_ascii=False)


def format_name(name: str) -> str:
    return name if BARE_NAME.fullmatch(name) else quote(name)
