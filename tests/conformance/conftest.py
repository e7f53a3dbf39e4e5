"""The ONNX node cases chosen by --conformance (tests/conformance/table.py adds the
option), one test each."""
from . import cases as conformance_cases


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        cases = conformance_cases.collect(metafunc.config.getoption("--conformance"))
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
