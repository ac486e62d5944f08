"""Maps the card's top-level folders into one installed namespace (docs/design.md, Boundaries).

engine/ -> clover_cli.engine, kernels/ -> clover_cli.kernels, tools/ -> clover_cli.tools,
prompts/ -> clover_cli.prompts. Data folders inside them (engine/bundled/tiny, the bundled model)
are listed as packages too, so setuptools ships their package data without warning that they are
absent from `packages`. Everything else lives in pyproject.toml.
"""
from setuptools import find_namespace_packages, find_packages, setup

FOLDERS = {"engine": "clover_cli.engine", "kernels": "clover_cli.kernels",
           "tools": "clover_cli.tools", "prompts": "clover_cli.prompts"}
DATA_PACKAGES = {"engine": ["bundled", "bundled.*"]}  # folders of package data, no __init__.py

packages = find_packages(include=["clover_cli", "clover_cli.*"])
package_dir = {"clover_cli": "clover_cli"}
for folder, namespace in FOLDERS.items():
    packages.append(namespace)
    package_dir[namespace] = folder
    packages.extend(f"{namespace}.{sub}" for sub in find_packages(folder))
    packages.extend(f"{namespace}.{sub}" for sub in find_namespace_packages(folder, include=DATA_PACKAGES.get(folder, [])))

setup(packages=packages, package_dir=package_dir)
