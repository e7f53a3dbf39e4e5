"""Compiles a cffi extension and puts it next to the C sources, atomically.

The new library is copied beside the target and renamed over it, so a process that has
the old one loaded keeps its mapping intact instead of crashing while it is rebuilt.
"""
import os
import pathlib
import shutil


def compile_and_install(ffibuilder, build_dir: pathlib.Path,
                        native_dir: pathlib.Path) -> pathlib.Path:
    build_dir.mkdir(parents=True, exist_ok=True)
    built = pathlib.Path(ffibuilder.compile(tmpdir=str(build_dir)))
    target = native_dir / built.name
    staging = target.with_name(target.name + ".tmp")
    shutil.copyfile(built, staging)
    os.replace(staging, target)
    return target
