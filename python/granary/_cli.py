"""The `granary` command of a pip-installed package: runs the command-line binary the package
carries (granary/_bin/granary), with this process's arguments, in this process's place."""

import os
import pathlib
import sys


def binary_path():
    """The path of the `granary` binary inside this package (present in a pip-installed package;
    in a build tree, the binary is build/tools/granary)."""
    return pathlib.Path(__file__).resolve().parent / "_bin" / "granary"


def main():
    binary = binary_path()
    if not binary.exists():
        sys.exit(f"granary: this package carries no command-line binary ({binary} is missing): "
                 "install the package with pip, or run the build tree's tools/granary")
    # The Python UDFs' helpers run this interpreter (the virtualenv's): --python_interpreter.
    os.environ.setdefault("GRANARY_PYTHON", sys.executable)
    os.execv(binary, [str(binary)] + sys.argv[1:])


if __name__ == "__main__":
    main()
