"""Maps the card's top-level folders into one installed namespace (docs/design.md, Boundaries).

engine/ -> clover_cli.engine, kernels/ -> clover_cli.kernels, tools/ -> clover_cli.tools,
prompts/ -> clover_cli.prompts. Everything else lives in pyproject.toml.
"""
from setuptools import find_packages, setup

FOLDERS = {"engine": "clover_cli.engine", "kernels": "clover_cli.kernels",
           "tools": "clover_cli.tools", "prompts": "clover_cli.prompts"}

packages = find_packages(include=["clover_cli", "clover_cli.*"])
package_dir = {"clover_cli": "clover_cli"}
for folder, namespace in FOLDERS.items():
    packages.append(namespace)
    package_dir[namespace] = folder
    packages.extend(f"{namespace}.{sub}" for sub in find_packages(folder))

setup(packages=packages, package_dir=package_dir)
