"""Build step only: everything else is in pyproject.toml.

The rule catalog (`rules/`) and the bundled allowlists (`allowlists/`) are top-level source
folders. A wheel carries them as package data under `reload_lint/_data/`, where
`reload_lint.rules.data_dir` looks first; a checkout and an editable install read the folders
in place, so this copy happens only for a regular (non-editable) build.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA = {"rules": "*.md", "allowlists": "*.toml"}


class build_py_with_data(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for folder, pattern in DATA.items():
            dest = Path(self.build_lib) / "reload_lint" / "_data" / folder
            if dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            for src in sorted((HERE / folder).glob(pattern)):
                shutil.copy2(src, dest / src.name)


setup(cmdclass={"build_py": build_py_with_data})
