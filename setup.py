"""Package discovery: `codemods/` installs as `npu_migrate_codemods` and `docs/` as
`npu_migrate_docs` (so `npu-migrate rules CODE` finds its page from a wheel), names that cannot
collide in site-packages."""
from setuptools import find_packages, setup

engine = find_packages(include=["npu_migrate", "npu_migrate.*"])
rules = ["npu_migrate_codemods" + name[len("codemods"):] for name in find_packages(include=["codemods", "codemods.*"])]
docs = ["npu_migrate_docs", "npu_migrate_docs.rules"]
setup(packages=engine + rules + docs,
      package_dir={"npu_migrate_codemods": "codemods", "npu_migrate_docs": "docs"})
