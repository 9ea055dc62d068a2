"""Package discovery: `codemods/` installs as `npu_migrate_codemods` so it cannot collide in site-packages."""
from setuptools import find_packages, setup

engine = find_packages(include=["npu_migrate", "npu_migrate.*"])
rules = ["npu_migrate_codemods" + name[len("codemods"):] for name in find_packages(include=["codemods", "codemods.*"])]
setup(packages=engine + rules, package_dir={"npu_migrate_codemods": "codemods"})
