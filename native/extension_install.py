"""Puts a freshly compiled cffi extension next to the C sources, atomically.

The new library is copied beside the target and renamed over it, so a process that has
the old one loaded keeps its mapping intact instead of crashing while it is rebuilt.
"""
import os
import pathlib
import shutil


def install_extension(built: pathlib.Path, native_dir: pathlib.Path) -> pathlib.Path:
    target = native_dir / built.name
    staging = target.with_name(target.name + ".tmp")
    shutil.copyfile(built, staging)
    os.replace(staging, target)
    return target
