"""bin/iree-benchmark-module --device=npu-sim."""
import pathlib
import subprocess

from hal_driver.tools import benchmark_module

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_benchmark_table(capsys, models):
    npu_vmfb = models["elementwise"][1]
    code = benchmark_module.main(["--device=npu-sim", f"--module={npu_vmfb}", "--function=two",
                                  "--input=4xi32=1 2 3 4", "--benchmark_repetitions=2",
                                  "--benchmark_min_time=3x"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[1].split() == ["Benchmark", "Time", "CPU", "Iterations", "UserCounters..."]
    rows = [line.split() for line in out if line.startswith("BM_two/")]
    assert [r[0] for r in rows] == ["BM_two/process_time/real_time"] * 2 + [
        f"BM_two/process_time/real_time_{s}" for s in ("mean", "median", "stddev", "cv")]
    assert rows[0][5] == "3" and rows[0][6].startswith("simulated_time=")
    assert "dispatches=1" in rows[0]


def test_benchmark_errors_and_stock_devices(models):
    bad = subprocess.run([str(REPO / "bin/iree-benchmark-module"), "--device=npu-sim",
                          f"--module={models['elementwise'][1]}", "--function=main"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("INVALID_ARGUMENT; function expects 2 inputs but 0 were provided")
    stock = subprocess.run([str(REPO / "bin/iree-benchmark-module"), "--device=local-sync",
                            f"--module={models['elementwise'][0]}", "--function=two",
                            "--input=4xi32=1", "--benchmark_min_time=1x"],
                           capture_output=True, text=True)
    assert stock.returncode == 0 and "BM_two/process_time/real_time" in stock.stdout
