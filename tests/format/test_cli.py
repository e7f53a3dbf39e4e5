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
    assert code == 0 and out == f"{binary}: ok (npu-fb 1.0, 1 exports, 54 instructions)\n"
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
