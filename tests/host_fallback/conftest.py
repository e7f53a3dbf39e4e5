import pathlib
import subprocess

import pytest

NATIVE_DIR = pathlib.Path(__file__).resolve().parents[2] / "native"
FAKE_LIBRARY_SOURCE = pathlib.Path(__file__).with_name("fake_library.c")


@pytest.fixture(scope="session")
def fake_library(tmp_path_factory):
    """Returns build(**defines) -> bytes of fake_library.c compiled with gcc."""
    workdir = tmp_path_factory.mktemp("fake")

    def build(**defines) -> bytes:
        name = "_".join(f"{k}{v}" for k, v in sorted(defines.items())) or "default"
        output = workdir / f"{''.join(c if c.isalnum() else '_' for c in name)}.so"
        flags = [f"-D{k}={v}" for k, v in defines.items()]
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{NATIVE_DIR}", *flags,
                        str(FAKE_LIBRARY_SOURCE), "-o", str(output)], check=True)
        return output.read_bytes()

    return build
