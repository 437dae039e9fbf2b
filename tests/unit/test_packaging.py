"""pyproject.toml lists trainctl's packages by hand (trainctl._templates lives outside trainctl/, so
setuptools' find would miss it): a new package directory that is not listed would be left out of
the wheel while every test run from the checkout still passes."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listed_packages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(config["packages"]), config["package-dir"]


def package_directories():
    """Every directory under trainctl/ that holds something to ship, as a dotted package name."""
    found = set()
    for directory in [ROOT / "trainctl", *(ROOT / "trainctl").rglob("*")]:
        if not directory.is_dir() or directory.name == "__pycache__":
            continue
        if any(child.is_file() for child in directory.iterdir()):
            found.add(".".join(directory.relative_to(ROOT).parts))
    return found


def test_every_package_directory_is_listed():
    packages, _ = listed_packages()
    missing = package_directories() - packages
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_every_listed_package_exists():
    packages, package_dir = listed_packages()
    for package in packages:
        top, _, rest = package.partition(".")
        base = package_dir.get(package) or str(Path(package_dir.get(top, top), *rest.split(".") if rest else ()))
        assert (ROOT / base).is_dir(), f"{package}: no directory {base}"

