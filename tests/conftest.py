"""Suite-wide pytest hooks, the initial conftest both of `pytest tests` and of
`pytest tests/conformance`:
- the ONNX conformance cases' option and table (tests/conformance/table.py);
- the order tests start in: the real-network tests (a minute or two each) first,
  longest first, so that pytest-xdist's workers (--dist worksteal) share them and the
  short tests fill in behind, rather than one worker running them at the end alone;
- in a pytest-xdist worker, the code generator lowers in its own process: the workers
  already keep every CPU busy, and its forked processes would only add their cost
  (tests/compiler/test_codegen_jobs.py asks for them explicitly)."""
from compiler_target import codegen
from tests.conformance import table

LONGEST_FIRST = ("tests/real_models/test_quantized.py", "tests/real_models/test_dynamic.py",
                 "tests/real_models/test_real_models.py")


def pytest_addoption(parser):
    table.add_option(parser)


def pytest_configure(config):
    config.pluginmanager.register(table, "conformance-table")
    if hasattr(config, "workerinput"):
        codegen.usable_cpus = lambda: 1


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        return next((i for i, path in enumerate(LONGEST_FIRST) if item.nodeid.startswith(path)),
                    len(LONGEST_FIRST))
    items.sort(key=rank)
