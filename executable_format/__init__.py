"""npu-fb: the NPU executable format, its ISA and its machine model. Imports nothing
else of this project; the compiler writes it and the runtime reads it.

Where to start: isa.py (the instruction set, the one source of truth) and machine.py
(the machine parameters).
  isa.py, machine.py      instructions and their fields; the NPU's parameters
  builder.py              ProgramBuilder / ExecutableBuilder: write npu-fb
  verifier.py, structure.py  every check before anything reads a buffer
  reader.py               read_executable: verified bytes -> Python objects
  asm.py, disasm.py, syntax.py  assembly text <-> npu-fb
  cost.py, ranges.py      the cycle model; the memory each instruction touches
  scalars.py, errors.py, version.py  scalar bit patterns; FormatError; identity
  c_header.py             generates native/npu_isa.h from isa.py
  generated/              flatc output (never edited; see docs/npu-fb-format.md)
  __main__.py             python -m executable_format verify|disasm|asm
"""
