"""sources.release_sources on archives built here (no network): a distribution whose import
package is not its own name (a vLLM fork repackaged: `vllm_npu` / `vllm-hust` ship `vllm/`),
from a wheel or an sdist; unsafe member names; an archive without the requested package."""

from __future__ import annotations

import io
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from reload_lint import bases, sources

META = "Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: vllm==0.9.1\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


def _tar(path: Path, members: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _serve(monkeypatch, archive: Path, calls=None):
    def fake(dist, version, log=None):
        if calls is not None:
            calls.append((dist, version))
        return archive

    monkeypatch.setattr(sources, "download_release", fake)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


FORK = {
    "vllm/__init__.py": "import fork_ext\n",
    "vllm/model_executor/layer.py": "X = 1\n",
    "vllm/model_executor/configs/a.json": "{}",
    "fork_ext/__init__.py": "",
}


def test_wheel_of_a_fork_keeps_the_requested_package_and_metadata(tmp_path, cache, monkeypatch):
    whl = _zip(
        tmp_path / "vllm_fork-1.0-py3-none-any.whl",
        {**FORK, "vllm_fork-1.0.dist-info/METADATA": META.format(name="vllm-fork")},
    )
    calls = []
    _serve(monkeypatch, whl, calls)
    root = sources.release_sources("vllm", "1.0", dist="vllm-fork")
    assert calls == [("vllm-fork", "1.0")]
    # kept apart from the vllm 1.0 release itself
    assert root != cache / "sources" / "vllm-1.0" and root.parent == cache / "sources"
    assert _tree(root) == [
        ".complete",
        "vllm/__init__.py",
        "vllm/model_executor/layer.py",
        "vllm_fork-1.0.dist-info/METADATA",
    ]
    # the metadata is where bases.suggest looks for the vLLM the package requires
    assert bases.suggest([root / "vllm"], [])[0] == "vllm==0.9.1"
    # cached: no second download
    assert sources.release_sources("vllm", "1.0", dist="vllm-fork") == root and len(calls) == 1


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_sdist_of_a_fork(tmp_path, cache, monkeypatch, kind):
    top = "vllm_fork-1.0/"
    members = {top + k: v for k, v in FORK.items()}
    members |= {
        top + "PKG-INFO": META.format(name="vllm-fork"),
        top + "setup.py": "raise SystemExit('never run')\n",
        top + "tests/test_x.py": "",
        top + "vllm_fork.egg-info/PKG-INFO": "Name: other\n",
    }
    path = tmp_path / f"vllm_fork-1.0.{kind}"
    (_tar if kind == "tar.gz" else _zip)(path, members)
    _serve(monkeypatch, path)
    root = sources.release_sources("vllm", "1.0", dist="vllm-fork")
    assert _tree(root) == [
        ".complete",
        "vllm/__init__.py",
        "vllm/model_executor/layer.py",
        "vllm_fork-1.0.dist-info/METADATA",
    ]
    assert (root / "vllm_fork-1.0.dist-info/METADATA").read_text().startswith("Metadata-Version")
    assert bases.suggest([root / "vllm"], [])[0] == "vllm==0.9.1"


def test_sdist_with_a_src_layout(tmp_path, cache, monkeypatch):
    path = _tar(
        tmp_path / "my_kernels-1.0.tar.gz",
        {"./my_kernels-1.0/src/my_kernels/k.py": "K = 1\n", "./my_kernels-1.0/PKG-INFO": ""},
    )
    _serve(monkeypatch, path)
    root = sources.release_sources("my_kernels", "1.0", dist="my-kernels")
    assert root == cache / "sources" / "my_kernels-1.0"
    assert "my_kernels/k.py" in _tree(root)


@pytest.mark.parametrize(
    "kind,bad",
    [
        ("whl", "vllm/../../evil.py"),
        ("whl", "/tmp/evil.py"),
        ("tar.gz", "vllm_fork-1.0/vllm/../../../evil.py"),
        ("tar.gz", "/vllm/evil.py"),
        ("zip", "vllm_fork-1.0\\..\\evil.py"),
        ("whl", "C:/evil.py"),
    ],
)
def test_unsafe_member_names_are_refused(tmp_path, cache, monkeypatch, kind, bad):
    prefix = "" if kind == "whl" else "vllm_fork-1.0/"
    members = {prefix + "vllm/__init__.py": "", bad: "print('pwned')\n"}
    path = tmp_path / f"vllm_fork-1.0{'-py3-none-any.' if kind == 'whl' else '.'}{kind}"
    (_tar if kind == "tar.gz" else _zip)(path, members)
    _serve(monkeypatch, path)
    with pytest.raises(sources.SourceError, match="refusing to unpack .*evil.py"):
        sources.release_sources("vllm", "1.0", dist="vllm-fork")
    assert not list(tmp_path.rglob("evil.py"))
    assert not (cache / "sources").exists() or not list((cache / "sources").iterdir())


def test_an_archive_without_the_package_is_an_error_not_an_empty_audit(
    tmp_path, cache, monkeypatch
):
    # the old cache bug: `vllm_npu`'s wheel ships `vllm/`, so asking for `vllm_npu/` unpacked
    # only the dist-info and marked it complete: every later run audited nothing
    whl = _zip(
        tmp_path / "vllm_npu-1.0-py3-none-any.whl",
        {"vllm/__init__.py": "", "vllm_npu-1.0.dist-info/METADATA": META.format(name="vllm_npu")},
    )
    _serve(monkeypatch, whl)
    for _ in range(2):  # the second run fails the same way: nothing was cached as complete
        with pytest.raises(sources.SourceError) as exc:
            sources.release_sources("vllm_npu", "1.0", dist="vllm_npu")
        msg = str(exc.value)
        assert "\n" not in msg
        assert "no .py file under vllm_npu/" in msg
        assert "vllm/, vllm_npu-1.0.dist-info/" in msg
    assert not list((cache / "sources").rglob(".complete"))
    assert not list((cache / "sources").iterdir())  # the temporary folder is gone too


def test_a_complete_marker_without_the_package_is_not_trusted(tmp_path, cache, monkeypatch):
    stale = cache / "sources" / "vllm_npu-1.0"
    (stale / "vllm_npu-1.0.dist-info").mkdir(parents=True)
    (stale / ".complete").write_text("vllm_npu-1.0-py3-none-any.whl\n")
    whl = _zip(tmp_path / "vllm_npu-1.0-py3-none-any.whl", {"vllm/__init__.py": ""})
    _serve(monkeypatch, whl)
    with pytest.raises(sources.SourceError, match="no .py file under vllm_npu/"):
        sources.release_sources("vllm_npu", "1.0", dist="vllm_npu")


def test_download_release_falls_back_to_the_sdist(tmp_path, cache, monkeypatch):
    def no_wheel(dist, version, log=None):
        raise sources.SourceError(f"pip could not download {dist}=={version}: no wheel")

    sdist = tmp_path / "x.tar.gz"
    monkeypatch.setattr(sources, "download_wheel", no_wheel)
    monkeypatch.setattr(sources, "download_sdist", lambda d, v, log=None: sdist)
    assert sources.download_release("vllm-fork", "1.0") == sdist

    def no_sdist(dist, version, log=None):
        raise sources.SourceError("pip could not download the sdist: offline")

    monkeypatch.setattr(sources, "download_sdist", no_sdist)
    with pytest.raises(sources.SourceError, match="no wheel; .*offline"):
        sources.download_release("vllm-fork", "1.0")


def test_sdist_fetch_uses_pips_finder_and_builds_nothing(tmp_path, cache, monkeypatch):
    # a find-links folder stands in for the index: the sdist is copied, never built (its
    # setup.py would leave a file behind)
    links = tmp_path / "links"
    links.mkdir()
    flag = tmp_path / "built"
    _tar(
        links / "vllm_fork-1.0.tar.gz",
        {
            "vllm_fork-1.0/setup.py": f"open({str(flag)!r}, 'w').close()\n",
            "vllm_fork-1.0/PKG-INFO": META.format(name="vllm-fork"),
            "vllm_fork-1.0/vllm/__init__.py": "",
        },
    )
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    log = io.StringIO()
    got = sources.download_sdist("vllm-fork", "1.0", log=log)
    assert got == cache / "wheels" / "vllm_fork-1.0.tar.gz" and got.is_file()
    assert "Downloading vllm_fork-1.0.tar.gz" in log.getvalue()
    assert not flag.exists()
    with pytest.raises(sources.SourceError, match="no sdist .* for vllm-fork==2.0"):
        sources.download_sdist("vllm-fork", "2.0", log=io.StringIO())


@pytest.mark.skipif(sys.platform == "win32", reason="posix paths")
def test_tar_links_are_not_unpacked(tmp_path, cache, monkeypatch):
    path = tmp_path / "vllm_fork-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        data = b"X = 1\n"
        info = tarfile.TarInfo("vllm_fork-1.0/vllm/real.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("vllm_fork-1.0/vllm/link.py")
        link.type = tarfile.SYMTYPE
        link.linkname = os.path.abspath("/etc/passwd")
        tf.addfile(link)
    _serve(monkeypatch, path)
    root = sources.release_sources("vllm", "1.0", dist="vllm-fork")
    assert _tree(root) == [".complete", "vllm/real.py"]
