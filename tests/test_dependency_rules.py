"""The project's dependency rules (docs/architecture.md), checked on every import
statement of every module, anywhere in the file (function-level imports too):
  executable_format  imports nothing of ours
  compiler_target    may import executable_format only
  hal_driver         may import executable_format and native, never compiler_target
                     (the specialiser is found through an entry point, not an import)
  native             imports nothing of ours (build scripts and cffi extensions)
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


def imported_packages(path: pathlib.Path, package: str) -> set[tuple[int, str]]:
    """(line, top-level package of ours) of each import in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [package if node.level else (node.module or "")]
        else:
            continue
        found |= {(node.lineno, name.split(".")[0]) for name in names
                  if name.split(".")[0] in OURS}
    return found


def violations(root: pathlib.Path) -> list[str]:
    problems = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            if "generated" in path.parts:
                continue
            for line, imported in sorted(imported_packages(path, package)):
                if imported not in allowed:
                    problems.append(f"{path.relative_to(root)}:{line}: {package} imports "
                                    f"{imported}")
    return problems


def test_main_follows_the_dependency_rules():
    assert violations(REPO) == []


def test_a_violation_is_reported(tmp_path: pathlib.Path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "hal_driver" / "bad.py").write_text(
        "def f():\n    from compiler_target.specialise import specialise_npu_fb\n")
    (tmp_path / "executable_format" / "worse.py").write_text("import hal_driver.status\n")
    assert violations(tmp_path) == [
        "executable_format/worse.py:1: executable_format imports hal_driver",
        "hal_driver/bad.py:2: hal_driver imports compiler_target"]
