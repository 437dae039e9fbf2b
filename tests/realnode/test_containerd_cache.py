"""The real node's kept containerd root (tests/cluster/containerd_cache.py, issue 39): a closed root keeps its
images and nothing of the session that used it; a root whose import failed is discarded at the next start.

A containerd of the test's own on a root under tmp_path, with the two smallest images (busybox, pause): the
node's own root is left alone.
"""

from __future__ import annotations

from tests.cluster import containerd_cache, images, realnode


def _ctr_listing(cache: containerd_cache.ContainerdCache, scratch) -> dict[str, list[str]]:
    with cache.serving(scratch) as ctr:
        return {"images": ctr("-n", "k8s.io", "images", "ls", "-q").split(),
                "containers": ctr("-n", "k8s.io", "containers", "ls", "-q").split(),
                "leases": ctr("-n", "k8s.io", "leases", "ls", "-q").split(),
                "snapshot kinds": sorted({line.split()[-1] for line in
                                          ctr("-n", "k8s.io", "snapshots", "ls").splitlines()[1:]})}


def test_a_closed_root_keeps_its_images_and_nothing_of_the_session(tmp_path):
    busybox, pause = images.build_busybox(), images.build_pause()
    kept = realnode.archive_image_name(busybox)
    cache = containerd_cache.ContainerdCache(tmp_path / "key")
    assert cache.open(tmp_path / "scratch", {kept}) is False  # nothing kept yet: a cold start
    with cache.serving(tmp_path / "scratch") as ctr:
        with cache.importing():
            ctr("-n", "k8s.io", "images", "import", str(busybox))
            ctr("-n", "k8s.io", "images", "import", str(pause))
        ctr("-n", "k8s.io", "containers", "create", kept, "a-container")
        ctr("-n", "k8s.io", "snapshots", "prepare", "an-orphan-snapshot")
        ctr("-n", "k8s.io", "leases", "create")

    cache.close(tmp_path / "scratch", {kept})

    assert cache.sealed()
    assert cache.open(tmp_path / "scratch", {kept}) is True
    assert not cache.sealed()  # open while a containerd uses it
    # the image not kept went, the kept one is still unpacked (a committed snapshot, nothing else)
    assert _ctr_listing(cache, tmp_path / "scratch") == {"images": [kept], "containers": [], "leases": [],
                                                         "snapshot kinds": ["Committed"]}


def test_a_root_whose_import_failed_is_not_sealed_and_the_next_start_discards_it(tmp_path):
    cache = containerd_cache.ContainerdCache(tmp_path / "key")
    cache.open(tmp_path / "scratch", set())
    with cache.serving(tmp_path / "scratch") as ctr:
        ctr("-n", "k8s.io", "images", "import", str(images.build_busybox()))
    try:
        with cache.importing():
            raise OSError(28, "No space left on device")  # what a full disk does to ctr import
    except OSError:
        pass

    cache.close(tmp_path / "scratch", set())

    assert not cache.sealed()
    assert cache.open(tmp_path / "scratch", set()) is False
    assert not cache.root.exists()


def test_each_node_has_a_kept_root_of_its_own_and_other_containerd_versions_roots_go(tmp_path, monkeypatch):
    monkeypatch.setattr(containerd_cache, "CACHE", tmp_path)
    first = containerd_cache.current().directory
    older = [tmp_path / "0123456789abcdef", tmp_path / "0123456789abcdef-trainctl-node-2"]
    for directory in [first, *older]:
        (directory / "root").mkdir(parents=True)

    second = containerd_cache.current("trainctl-node-2").directory

    assert second == tmp_path / f"{first.name}-trainctl-node-2"
    (second / "root").mkdir(parents=True)
    assert containerd_cache.current().directory == first
    assert sorted(path.name for path in tmp_path.iterdir()) == [first.name, second.name]  # each node's start keeps both
