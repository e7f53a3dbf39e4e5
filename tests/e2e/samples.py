"""The samples the end-to-end tests build, and what each must do on npu-sim.

Every sample in samples/*/make_model.py is listed with its model file name, its exported
function and which dispatches must stay on the host CPU (matched by a substring of the
dispatch name, with a substring the compiler's reason must contain); every other
dispatch must run on the NPU.
"""
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SAMPLES_DIR = REPO / "samples"

# Output tolerances per dtype: |actual - expected| <= atol + rtol * |expected|.
# f32: 1e-4 absolute + 1e-4 relative. The NPU accumulates in f32 like the host, but in a
# different order (im2col/tiled K chunks vs llvm-cpu's vectorized loops), so results
# differ from each other and from onnx's reference by rounding; 1e-4 bounds that for the
# samples' sizes (largest reduction: K = 512 in mlp) with a wide margin.
TOLERANCES = {np.dtype(np.float32): {"rtol": 1e-4, "atol": 1e-4}}


@dataclass(frozen=True)
class Sample:
    name: str                   # directory under samples/
    model: str                  # file name the generator writes (without .onnx)
    function: str               # the exported function (the ONNX graph name)
    host: dict = field(default_factory=dict)   # dispatch name part -> reason part


SAMPLES = {s.name: s for s in [
    Sample("onnx_conv", "single_conv", "SingleConv"),
    Sample("small_cnn", "small_cnn", "SmallCNN"),
    Sample("mlp", "mlp", "MLP"),
    Sample("depthwise_separable", "depthwise_separable", "DepthwiseSeparable"),
    Sample("residual_blocks", "residual_blocks", "ResidualBlocks"),
    Sample("host_fallback", "host_fallback", "HostFallback",
           host={"scan": "iree_linalg_ext.scan has no NPU equivalent"}),
]}


def generate(sample: Sample, out_dir: Path) -> Path:
    """Writes the sample's model, input_0.npy and expected_0.npy (onnx reference) into
    out_dir with the generator's own build() and save(); returns the .onnx path."""
    spec = importlib.util.spec_from_file_location(
        f"make_model_{sample.name}", SAMPLES_DIR / sample.name / "make_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)    # the generator puts samples/ on sys.path itself
    from sample_common import save
    model, inputs = module.build()
    save(model, out_dir, sample.model, inputs)
    return out_dir / f"{sample.model}.onnx"


def tolerance(dtype) -> dict:
    return TOLERANCES[np.dtype(dtype)]
