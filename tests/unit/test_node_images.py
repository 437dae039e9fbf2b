"""The real node's image set (tests/cluster/images.py): which images every node start imports and
which only the tests that need them pull in (issue 33), checked without building anything."""

from __future__ import annotations

from tests.cluster import images


def test_the_frameworks_image_is_built_with_the_rest_but_imported_only_on_demand():
    assert "python-frameworks" not in images.BUILDERS  # a node start does not import 1.7 GB it may not use
    assert set(images.ALL_BUILDERS) == {*images.BUILDERS, "python-frameworks"}


def test_the_frameworks_image_takes_the_cpu_pins_of_requirements():
    pins = images.pinned_requirements(images.FRAMEWORKS_IMAGE_PACKAGES)
    assert [pin.split("==")[0] for pin in pins] == ["numpy", "xgboost-cpu", "paddlepaddle", "jax", "jaxlib"]
    assert all("==" in pin for pin in pins)  # exact pins: no resolver choosing a CUDA build


def test_an_unknown_image_is_a_one_line_error_naming_the_choices(capsys):
    assert images.main(["pytorch-frameworks"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "'pytorch-frameworks'" in error and "python-frameworks" in error


def test_the_images_split_into_those_built_beside_the_kubernetes_build_and_those_after_it():
    beside, after = images.selected_kinds(["--from", "debian"]), images.selected_kinds(["--from", "kube-build"])
    assert sorted([*beside, *after]) == sorted(images.ALL_BUILDERS)  # every image, once
    assert after == ["pause", "kubectl-delivery"]  # pause.c from the source tree, the node's kubectl
    assert "python" in beside and "controller" in beside


def test_an_unknown_source_is_a_one_line_error_naming_the_choices(capsys):
    assert images.main(["--from", "docker"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "--from" in error and "debian" in error and "kube-build" in error


def test_building_one_kind_keeps_the_archive_of_a_kind_whose_name_it_prefixes(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "CACHE", tmp_path)
    frameworks = tmp_path / "python-frameworks-0123456789abcdef.oci.tar"
    stale_python = tmp_path / "python-fedcba9876543210.oci.tar"
    for archive in (frameworks, stale_python):
        archive.write_bytes(b"")
    assert images.archives_of("python") == [stale_python]
    images._cached_build("python", "00000000000000aa", lambda layer, work: layer.write_bytes(b""),
                         images.ImageConfig(entrypoint=["python3"]))
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "python-00000000000000aa.oci.tar", frameworks.name]
