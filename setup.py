"""The one build step pyproject.toml cannot declare: a wheel carries the suite's own
``matrices/`` and ``kernels/`` (policy, arches, shapes, formats; kernel sources, headers,
manifests) inside the package as ``hqval/_suite/``, where ``hqval.suite_dir`` finds them,
so a plain ``pip install .`` runs from any directory.  An editable install reads them from
the checkout and copies nothing."""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SUITE_DIRS = ("matrices", "kernels")


class BuildWithSuiteFiles(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in SUITE_DIRS:
            self.copy_tree(name, str(Path(self.build_lib) / "hqval" / "_suite" / name))


setup(cmdclass={"build_py": BuildWithSuiteFiles})
