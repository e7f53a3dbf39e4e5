"""python -m executable_format: exit codes and one-line messages."""
import pathlib
import subprocess
import sys

from executable_format.__main__ import main

from .helpers import relu_executable

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONV = ROOT / "samples" / "asm" / "conv_tile.s"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_asm_verify_disasm(tmp_path, capsys):
    binary, listing = tmp_path / "conv.npufb", tmp_path / "conv.s"
    assert run(capsys, "asm", CONV, "-o", binary)[0] == 0
    code, out, _ = run(capsys, "verify", binary)
    assert code == 0 and out == f"{binary}: ok (npu-fb 2.0, 1 exports, 54 instructions)\n"
    assert run(capsys, "disasm", binary, "-o", listing)[0] == 0
    code, out, _ = run(capsys, "disasm", binary)
    assert code == 0 and out == listing.read_text()
    assert run(capsys, "asm", listing)[0] == 0                  # default output: conv.npufb
    assert binary.read_bytes() == (tmp_path / "conv.npufb").read_bytes()


def test_verify_failure_is_one_line(tmp_path, capsys):
    data = bytearray(relu_executable())
    data[4:8] = b"XXXX"
    bad = tmp_path / "bad.npufb"
    bad.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", bad)
    assert code == 1 and out == ""
    assert err == "error: npu-fb verification failed: file identifier b'XXXX' is not b'NPUF'\n"
    code, _, err = run(capsys, "disasm", bad)
    assert code == 1 and err.count("\n") == 1


def test_sram_overflow_message(tmp_path, capsys):
    text = CONV.read_text().replace("sram_addr=0x1200,", "sram_addr=0x1ffff0,")
    text = text.replace(".sram_bytes 19776", ".sram_bytes 2097152")
    source = tmp_path / "bad.s"
    source.write_text(text)
    line = 1 + next(i for i, t in enumerate(text.splitlines()) if "0x1ffff0" in t)
    code, _, err = run(capsys, "asm", source)
    assert code == 1
    assert err == (f"error: {source}:{line}: npu-fb verification failed: export 0 instruction 3 "
                   f"(dma.load): SRAM range [2097136, 2097200) of sram_addr exceeds "
                   f"sram_bytes 2097152\n")


def test_field_beyond_the_address_space_names_the_line(tmp_path, capsys):
    """Without .sram_bytes the program declares its highest SRAM byte, which must fit the
    schema's uint: a vadd at 0xfffffff0 is one error naming its line, not a traceback."""
    relu = ("vrelu.f32 dst=0x2d40, src=0x2d40, n0=16, n1=4, n2=16, dst_s0=64, dst_s1=16, "
            "dst_s2=1, src_s0=64, src_s1=16, src_s2=1")
    vadd = ("vadd.f32 dst=0xfffffff0, lhs=0x2d40, rhs=0x2d40, n0=16, n1=4, n2=16, dst_s0=64, "
            "dst_s1=16, dst_s2=1, lhs_s0=64, lhs_s1=16, lhs_s2=1, rhs_s0=64, rhs_s1=16, rhs_s2=1")
    lines = [line for line in CONV.read_text().replace(relu, vadd, 1).splitlines()
             if not line.startswith(".sram_bytes")]
    source = tmp_path / "far.s"
    source.write_text("\n".join(lines) + "\n")
    line = 1 + next(i for i, t in enumerate(lines) if "0xfffffff0" in t)
    code, _, err = run(capsys, "asm", source)
    assert code == 1
    assert err == (f"error: {source}:{line}: export 0 instruction 13 (vadd): SRAM range "
                   f"[4294967280, 4294971376) of dst exceeds the 32-bit SRAM address space\n")


def test_bad_inputs_exit_1_without_traceback(tmp_path, capsys):
    missing = tmp_path / "missing.npufb"
    code, _, err = run(capsys, "verify", missing)
    assert code == 1 and err.startswith("error: ") and err.count("\n") == 1
    binary = tmp_path / "binary.s"
    binary.write_bytes(b"\xff\xfe\x00")
    code, _, err = run(capsys, "asm", binary)
    assert code == 1 and err == f"error: {binary}: not UTF-8 assembly text\n"
    for data in (b"", b"\x00" * 64, relu_executable()[:100]):
        path = tmp_path / "x.npufb"
        path.write_bytes(data)
        code, _, err = run(capsys, "verify", path)
        assert code == 1 and err.startswith("error: npu-fb verification failed: ")
        assert err.count("\n") == 1


def test_module_entry_point(tmp_path):
    result = subprocess.run([sys.executable, "-m", "executable_format", "verify",
                             str(tmp_path / "nothing")], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
