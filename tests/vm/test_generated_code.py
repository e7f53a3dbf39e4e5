"""The committed flatc output must match what flatc generates from the schema now."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "bytecode_module_def.fbs"
GENERATED = ROOT / "hal_driver" / "vm" / "generated" / "bytecode_module_def_generated.py"


def test_generated_python_is_up_to_date(tmp_path):
    flatc = pathlib.Path(sys.executable).parent / "flatc"
    subprocess.run([str(flatc), "--python", "--gen-onefile", "-o", str(tmp_path), str(SCHEMA)], check=True)
    fresh = (tmp_path / GENERATED.name).read_text()
    assert fresh == GENERATED.read_text(), (
        "hal_driver/vm/generated is stale; regenerate with: .venv/bin/flatc --python --gen-onefile "
        "-o hal_driver/vm/generated schemas/bytecode_module_def.fbs")
