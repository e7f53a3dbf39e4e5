"""The bench's matplotlib pictures: a roofline chart of dispatch rows and an engine
timeline of a trace are written as PNG files; the busy fraction per time bin is the
overlap of the engine's spans with the bin."""
import numpy as np

from executable_format.machine import DEFAULT_MACHINE
from hal_driver.device.trace import TID
from tests.bench import chart

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_busy_time_is_split_across_bins():
    edges = np.linspace(0.0, 4.0, 5)          # bins [0,1) [1,2) [2,3) [3,4)
    row = np.zeros(4)
    chart._add_busy(row, edges, 0.5, 2.0)     # [0.5, 2.5)
    chart._add_busy(row, edges, 3.0, 1.0)     # [3, 4)
    np.testing.assert_allclose(row, [0.5, 1.0, 0.5, 1.0])


def test_roofline_chart_is_written(tmp_path):
    rows = [{"dtype": "f32", "useful_macs": 10**6, "dram_bytes": 4 * 10**4, "npu_cycles": 5000,
             "roofline_cycles": 3906},
            {"dtype": "i8", "useful_macs": 10**8, "dram_bytes": 10**6, "npu_cycles": 60000,
             "roofline_cycles": 48828}]
    path = tmp_path / "roofline.png"
    chart.roofline_chart(rows, DEFAULT_MACHINE, path, 10_000)
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_timeline_chart_is_written(tmp_path):
    events = [{"ph": "X", "tid": TID["npu"], "ts": 0.0, "dur": 10.0, "name": "d0"},
              {"ph": "X", "tid": TID["mac"], "ts": 1.0, "dur": 5.0, "name": "matmul"},
              {"ph": "X", "tid": TID["dma_in"], "ts": 0.0, "dur": 2.0, "name": "dma.load"}]
    path = tmp_path / "timeline.png"
    chart.timeline_chart(events, path, "model")
    assert path.read_bytes().startswith(PNG_MAGIC)
