"""The committed flatc output matches schemas/npu_executable.fbs."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLATC = pathlib.Path(sys.executable).parent / "flatc"
GENERATED = "npu_executable_generated.py"


def test_generated_code_is_current(tmp_path):
    subprocess.run([str(FLATC), "--python", "--gen-onefile", "-o", str(tmp_path),
                    str(ROOT / "schemas" / "npu_executable.fbs")], check=True)
    fresh = (tmp_path / GENERATED).read_text()
    committed = (ROOT / "executable_format" / "generated" / GENERATED).read_text()
    assert fresh == committed, ("executable_format/generated is stale: regenerate it "
                                "(docs/npu-fb-format.md)")


def test_schema_header_names_the_command():
    header = (ROOT / "schemas" / "npu_executable.fbs").read_text()
    assert ("flatc --python --gen-onefile -o executable_format/generated "
            "schemas/npu_executable.fbs") in header
