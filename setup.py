"""Builds the `granary` Python package with the project's CMake, offline, against the interpreter
that runs it: the pure-Python modules (python/granary/), the pybind11 extension, the `granary`
command-line binary, and the Granary libraries both load (the wheel's granary/_libs/; the Debian
libraries they link — gRPC, protobuf, RocksDB, ... — stay the system's).

    python3 -m venv --system-site-packages VENV       # sees Debian's numpy and torch
    VENV/bin/pip install --no-build-isolation .       # setuptools and wheel from Debian
    VENV/bin/python3 -m build --no-isolation --wheel  # or a wheel (python3-build)

(scripts/pip_install.sh does all three steps' set-up: the Debian packages, the virtualenv, the
install.) The CMake build directory is $GRANARY_BUILD_DIR, else the source tree's build/ when it
is new or builds the extension for this interpreter's ABI, else build/pip-<ABI>; only the targets
the package needs are built there ($GRANARY_JOBS jobs, default 2), and staged without their
debugging sections. A new build directory first
installs the missing Debian packages (scripts/setup_deps.sh; GRANARY_SKIP_APT=1 skips it).
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import setuptools
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
# Where the staged package keeps the Granary libraries and the binary, relative to granary/.
LIBS_DIR = "_libs"
BIN_DIR = "_bin"


def _project_version():
    match = re.search(r"project\(granary VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if match is None:
        raise RuntimeError("CMakeLists.txt names no `project(granary VERSION ...)`")
    return match.group(1)


def _cached_soabi(build_dir):
    """The ABI tag of the interpreter a configured build directory builds the extension for
    (python/CMakeLists.txt caches it), or None when it builds none."""
    match = re.search(r"^GRANARY_PYTHON_SOABI:INTERNAL=(.*)$",
                      (build_dir / "CMakeCache.txt").read_text(), re.MULTILINE)
    return match.group(1) if match else None


def _build_dir():
    """The build directory to use, and the interpreter to configure it with when it is new."""
    soabi = sysconfig.get_config_var("SOABI")
    chosen = os.environ.get("GRANARY_BUILD_DIR")
    candidates = ([pathlib.Path(chosen)] if chosen else
                  [ROOT / "build", ROOT / "build" / f"pip-{soabi}"])
    for build_dir in candidates:
        if not (build_dir / "CMakeCache.txt").exists():
            return build_dir.resolve(), os.path.realpath(sys.executable)
        if _cached_soabi(build_dir) is None:  # configured before the entry existed: refresh
            subprocess.run(["cmake", str(build_dir)], check=True, capture_output=True)
        if _cached_soabi(build_dir) == soabi:
            return build_dir.resolve(), None
    raise RuntimeError(
        f"the build directory {candidates[-1]} builds the Python extension for "
        f"{_cached_soabi(candidates[-1]) or 'no interpreter'}, not for this one "
        f"({sys.executable}, {soabi}): set GRANARY_BUILD_DIR to another directory")


def _granary_dependencies(path, build_dir):
    """The Granary libraries (those in the build directory) `path` loads, directly or not."""
    listing = subprocess.run(["ldd", str(path)], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in listing.splitlines():
        match = re.match(r"\s*(\S+) => (\S+) \(", line)
        if match is None:
            continue
        if match.group(2) == "not":
            raise RuntimeError(f"{path} needs {match.group(1)}, which is not found")
        resolved = pathlib.Path(match.group(2)).resolve()
        if build_dir in resolved.parents:
            found[match.group(1)] = resolved
    return found


def _stage(source, target, runpath):
    """Copies an ELF file into the package without its debugging sections (the build tree keeps
    them), with `runpath` when it loads other Granary libraries."""
    subprocess.run(["strip", "--strip-debug", "-o", str(target), str(source)], check=True)
    if runpath is not None:
        subprocess.run(["cmake", f"-DFILE={target}", f"-DRUNPATH={runpath}", "-P",
                        str(ROOT / "scripts" / "set_runpath.cmake")], check=True)


class BuildWithCMake(build_py):
    """build_py, then the CMake build of the extension and the binary, staged into the package
    with the libraries they load and run-paths relative to themselves."""

    def run(self):
        super().run()
        build_dir, configure_with = _build_dir()
        jobs = os.environ.get("GRANARY_JOBS", "2")
        if configure_with is not None:
            subprocess.run([str(ROOT / "scripts" / "setup_deps.sh")], check=True)
            build_dir.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir),
                            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                            f"-DPython3_EXECUTABLE={configure_with}"], check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "-j", jobs, "--target", "_granary",
                        "granary", "granary_python_package"], check=True)
        package = pathlib.Path(self.build_lib) / "granary"
        extension = build_dir / "python" / "granary" / ("_granary" + EXT_SUFFIX)
        binary = build_dir / "tools" / "granary"
        for staged in (package / LIBS_DIR, package / BIN_DIR):
            shutil.rmtree(staged, ignore_errors=True)
            staged.mkdir(parents=True)
        libraries = {}
        for source, target, runpath in (
                (extension, package / extension.name, "$ORIGIN/" + LIBS_DIR),
                (binary, package / BIN_DIR / "granary", "$ORIGIN/../" + LIBS_DIR)):
            _stage(source, target, runpath)
            libraries.update(_granary_dependencies(source, build_dir))
        for name, source in libraries.items():
            _stage(source, package / LIBS_DIR / name,
                   "$ORIGIN" if _granary_dependencies(source, build_dir) else None)


class BinaryDistribution(setuptools.Distribution):
    """The wheel holds compiled code for this platform and interpreter (built by CMake, not by
    setuptools' own extension building)."""

    def has_ext_modules(self):
        return True


os.makedirs(ROOT / "build" / "setuptools", exist_ok=True)
setuptools.setup(
    version=_project_version(),
    package_dir={"": "python"},
    packages=["granary"],
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    options={"build": {"build_base": "build/setuptools"},
             "egg_info": {"egg_base": "build/setuptools"}},
    zip_safe=False,
)
