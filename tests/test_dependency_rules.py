"""The project's dependency rules (docs/architecture.md), checked on every import
statement of every module, anywhere in the file (function-level imports too):
  executable_format  imports nothing of ours
  compiler_target    may import executable_format only
  hal_driver         may import executable_format and native, never compiler_target
                     (the specialiser is found through an entry point, not an import)
  native             imports nothing of ours (build scripts and cffi extensions)
Inside hal_driver, the device and the VM know nothing of each other or of the layers
above them (hal, io_parameters, iree_runtime_api, runtime, tools): the `hal` module is
where device objects become VM refs.
"""
import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
OURS = ("executable_format", "compiler_target", "hal_driver", "native")
ALLOWED = {
    "executable_format": {"executable_format"},
    "compiler_target": {"compiler_target", "executable_format"},
    "hal_driver": {"hal_driver", "executable_format", "native"},
    "native": {"native"},
}
# hal_driver sub-packages: the hal_driver modules each may import.
LAYERS = {
    "hal_driver/device": ("hal_driver.device", "hal_driver.status"),
    "hal_driver/vm": ("hal_driver.vm", "hal_driver.status"),
}


def imported_modules(path: pathlib.Path, package: str) -> set[tuple[int, str]]:
    """(line, module of ours) of each import in the file (a relative import counts as
    its top-level package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [package if node.level else (node.module or "")]
        else:
            continue
        found |= {(node.lineno, name) for name in names if name.split(".")[0] in OURS}
    return found


def _layer_allows(layer: str, module: str) -> bool:
    return not module.startswith("hal_driver") or any(
        module == allowed or module.startswith(allowed + ".") for allowed in LAYERS[layer])


def violations(root: pathlib.Path) -> list[str]:
    problems = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            if "generated" in path.parts:
                continue
            relative = path.relative_to(root)
            layer = next((l for l in LAYERS if relative.as_posix().startswith(l + "/")), None)
            for line, module in sorted(imported_modules(path, package)):
                if module.split(".")[0] not in allowed:
                    problems.append(f"{relative}:{line}: {package} imports {module}")
                elif layer and not _layer_allows(layer, module):
                    problems.append(f"{relative}:{line}: {layer} imports {module}")
    return problems


def test_main_follows_the_dependency_rules():
    assert violations(REPO) == []


def test_a_violation_is_reported(tmp_path: pathlib.Path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "hal_driver" / "bad.py").write_text(
        "def f():\n    from compiler_target.specialise import specialise_npu_fb\n")
    (tmp_path / "executable_format" / "worse.py").write_text("import hal_driver.status\n")
    (tmp_path / "hal_driver" / "device").mkdir()
    (tmp_path / "hal_driver" / "device" / "layered.py").write_text(
        "from hal_driver.status import StatusError\nfrom hal_driver.vm.ref import VmRef\n")
    assert violations(tmp_path) == [
        "executable_format/worse.py:1: executable_format imports hal_driver.status",
        "hal_driver/bad.py:2: hal_driver imports compiler_target.specialise",
        "hal_driver/device/layered.py:2: hal_driver/device imports hal_driver.vm.ref"]
