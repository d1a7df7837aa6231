"""The package as pip installs it (scripts/pip_install.sh into GRANARY_PYTHON_VENV): imported
from the virtualenv, never from the build tree; its extension, its libraries and its `granary`
command load the Granary libraries it carries, whatever the build tree holds."""

import os
import pathlib
import re
import subprocess
import sys
import unittest

import granary
import granary._cli

VENV = os.environ.get("GRANARY_PYTHON_VENV")
BINARY_DIR = os.environ.get("GRANARY_BINARY_DIR")


def granary_libraries_loaded_by(path):
    """What ldd resolves `path`'s libgranary_* dependencies to: {name: resolved path}."""
    listing = subprocess.run(["ldd", str(path)], check=True, capture_output=True,
                             text=True).stdout
    return dict(re.findall(r"^\s*(libgranary_\S+) => (\S+)", listing, re.MULTILINE))


@unittest.skipUnless(VENV, "GRANARY_PYTHON_VENV names no pip-installed virtualenv")
class InstalledPackageTest(unittest.TestCase):
    def setUp(self):
        self.package = pathlib.Path(granary.__file__).resolve().parent

    def test_the_package_is_imported_from_the_virtualenv(self):
        self.assertTrue(self.package.is_relative_to(pathlib.Path(VENV).resolve()),
                        f"granary was imported from {self.package}, not from {VENV}")
        self.assertEqual(pathlib.Path(sys.prefix).resolve(), pathlib.Path(VENV).resolve())

    def test_every_binary_loads_the_libraries_the_package_carries(self):
        libraries = self.package / "_libs"
        binaries = ([granary._cli.binary_path()] + sorted(self.package.glob("_granary*.so")) +
                    sorted(libraries.glob("*.so")))
        self.assertGreater(len(binaries), 2)
        for binary in binaries:
            for name, resolved in granary_libraries_loaded_by(binary).items():
                self.assertEqual(pathlib.Path(resolved).resolve().parent, libraries.resolve(),
                                 f"{binary} loads {name} from {resolved}")
            if BINARY_DIR:
                self.assertNotIn(str(pathlib.Path(BINARY_DIR).resolve()),
                                 subprocess.run(["readelf", "-d", str(binary)], check=True,
                                                capture_output=True, text=True).stdout,
                                 f"{binary}'s run-path names the build tree")

    def test_the_granary_command_runs_the_carried_binary(self):
        command = pathlib.Path(VENV) / "bin" / "granary"
        help_text = subprocess.run([str(command), "--help"], capture_output=True, text=True,
                                   timeout=60)
        self.assertEqual(help_text.returncode, 0, help_text.stderr)
        self.assertIn("usage: granary <command>", help_text.stdout + help_text.stderr)

    def test_an_unknown_command_is_an_error_naming_it(self):
        command = pathlib.Path(VENV) / "bin" / "granary"
        done = subprocess.run([str(command), "no_such_command"], capture_output=True, text=True,
                              timeout=60)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no_such_command", done.stderr)

    def test_a_pipeline_runs_in_process(self):
        rows = sum(len(v) for (v,) in granary.local(granary.Dataset.range(100).batch(7)))
        self.assertEqual(rows, 100)


if __name__ == "__main__":
    unittest.main()
