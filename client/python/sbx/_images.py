"""Container images (docs/images.md): ``client.images`` pulls, lists, inspects and
removes the caller's images; ``client.create(image=...)`` makes a sandbox from one."""

from __future__ import annotations

import os
from ctypes import POINTER, byref, cast, c_void_p, pointer
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from . import _lib as L
from ._client import _dec, _dec_opt, _strv
from ._types import Code

if TYPE_CHECKING:  # pragma: no cover
    from ._client import Client


@dataclass(frozen=True)
class ImageConfig:
    """An image's defaults for processes and its platform (``sbx image inspect``)."""

    env: Tuple[str, ...]
    entrypoint: Tuple[str, ...]
    cmd: Tuple[str, ...]
    working_dir: Optional[str]
    user: Optional[str]
    os: Optional[str]
    architecture: Optional[str]
    variant: Optional[str]
    labels: Dict[str, str] = field(default_factory=dict)  # a snapshot's: docs/snapshots.md


@dataclass(frozen=True)
class ImageInfo:
    """One of the caller's images (``struct sbx_image``)."""

    #: Your names of it, canonical (``docker.io/library/python:3.12-slim``).
    names: Tuple[str, ...]
    #: Its manifest digest ("sha256:..."), its id: a name for ``create(image=...)`` too.
    digest: str
    size_bytes: int
    data_bytes: int
    #: The caller's sandboxes (own or shared) using it now (it cannot be removed meanwhile).
    sandboxes: int
    created_unix_ms: int
    last_used_unix_ms: int
    layers: Tuple[str, ...]
    #: Its config (``inspect`` only).
    config: Optional[ImageConfig] = None
    #: Bytes this pull fetched (``pull`` only).
    downloaded_bytes: int = 0


@dataclass(frozen=True)
class PullProgress:
    """How far a pull is: one layer (``phase`` "download") or the unpacking ("unpack")."""

    phase: str
    digest: Optional[str]
    index: int
    count: int
    done_bytes: int
    total_bytes: int
    reused: bool


@dataclass(frozen=True)
class RemovedImages:
    names: Tuple[str, ...]
    freed_bytes: int


def _config(c: L.ImageConfig) -> ImageConfig:
    return ImageConfig(
        env=_strv(c.env),
        entrypoint=_strv(c.entrypoint),
        cmd=_strv(c.cmd),
        working_dir=_dec_opt(c.working_dir),
        user=_dec_opt(c.user),
        os=_dec_opt(c.os),
        architecture=_dec_opt(c.architecture),
        variant=_dec_opt(c.variant),
        labels={
            c.labels[i].key.decode(): c.labels[i].value.decode() for i in range(c.n_labels)
        },
    )


def _image(i: L.Image) -> ImageInfo:
    return ImageInfo(
        names=_strv(i.names),
        digest=_dec(i.digest),
        size_bytes=int(i.size_bytes),
        data_bytes=int(i.data_bytes),
        sandboxes=int(i.sandboxes),
        created_unix_ms=int(i.created_unix_ms),
        last_used_unix_ms=int(i.last_used_unix_ms),
        layers=_strv(i.layers),
        config=_config(i.config.contents) if i.config else None,
        downloaded_bytes=int(i.downloaded_bytes),
    )


class Images:
    """``client.images``: the caller's container images in the daemon's store. Names are
    per user (another user's image is :class:`NotFound`); content is shared."""

    def __init__(self, client: "Client") -> None:
        self._client = client

    def _one(self, fn, *args) -> ImageInfo:
        c = self._client
        ret = POINTER(L.Image)()
        with c._locked() as h:
            code = fn(h, *args, byref(ret))
            if code != Code.OK:
                c._raise(code)
        try:
            return _image(ret.contents)
        finally:
            c._lib.sbx_image_free(ret)

    def pull(
        self,
        source: str,
        *,
        on_progress: Optional[Callable[[PullProgress], None]] = None,
        username: Optional[str] = None,
        password: Optional[str] = None,
        token: Optional[str] = None,
    ) -> ImageInfo:
        """Pulls ``source`` for you: a registry reference (``"python:3.12-slim"``,
        ``"host:5000/app:v1"``, ``"name@sha256:..."``) or a local source read with your
        rights (``"oci:/abs/dir:tag"``, ``"oci-archive:/abs/file"``,
        ``"docker-archive:/abs/file"``). ``on_progress`` is called with a
        :class:`PullProgress` as layers come. Credentials (``username`` and
        ``password``, or ``token``) go with this pull only. The call waits within the
        client's ``call_timeout``."""
        c = self._client
        o = L.PullOpts()
        keep: List[object] = []
        if username is not None or password is not None or token is not None:
            auth = L.RegistryAuth(
                username=username.encode() if username is not None else None,
                password=password.encode() if password is not None else None,
                token=token.encode() if token is not None else None,
            )
            keep.append(auth)
            o.auth = pointer(auth)
        errors: List[BaseException] = []
        if on_progress is not None:

            def tramp(_ud: Optional[int], p: "L.POINTER[L.ImageProgress]") -> None:
                if errors:
                    return
                q = p.contents
                try:
                    on_progress(
                        PullProgress(
                            phase=_dec(q.phase),
                            digest=_dec_opt(q.digest),
                            index=int(q.index),
                            count=int(q.count),
                            done_bytes=int(q.done_bytes),
                            total_bytes=int(q.total_bytes),
                            reused=bool(q.reused),
                        )
                    )
                except BaseException as e:  # noqa: BLE001 - raised after the call
                    errors.append(e)

            cb = L.ProgressCallback(tramp)
            keep.append(cb)
            o.on_progress = cb
        o.userdata = cast(None, c_void_p)
        info = self._one(c._lib.sbx_image_pull, source.encode(), byref(o))
        if errors:
            raise errors[0]
        return info

    def list(self) -> List[ImageInfo]:
        """Your images, oldest first."""
        c = self._client
        ret = POINTER(L.ImageList)()
        with c._locked() as h:
            code = c._lib.sbx_image_list(h, byref(ret))
            if code != Code.OK:
                c._raise(code)
        try:
            lst = ret.contents
            return [_image(lst.v[i]) for i in range(lst.n)]
        finally:
            c._lib.sbx_image_list_free(ret)

    def snapshot(self, sandbox_id: str, name: Optional[str] = None) -> ImageInfo:
        """Captures sandbox ``sandbox_id``'s files (its root and ``/workspace``; one made
        from an image) as an image of its owner's named ``name`` (default
        ``localhost/ID:UNIXMS``), its processes frozen meanwhile (docs/snapshots.md)."""
        return self._one(
            self._client._lib.sbx_snapshot, sandbox_id.encode(), name.encode() if name else None
        )

    def export(self, name: str, path: str) -> ImageInfo:
        """Writes the image ``name`` to ``path`` as an OCI archive (what ``skopeo copy
        oci-archive:PATH`` and ``podman load`` read), with your rights; a file the export
        could not finish is removed."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        ok = False
        try:
            info = self._one(self._client._lib.sbx_image_export, name.encode(), fd)
            ok = True
            return info
        finally:
            os.close(fd)
            if not ok:
                os.unlink(path)

    def inspect(self, name: str) -> ImageInfo:
        """The image ``name`` (a name of yours, or its digest) with its config."""
        return self._one(self._client._lib.sbx_image_inspect, name.encode())

    def _removed(self, fn, *args) -> RemovedImages:
        c = self._client
        ret = POINTER(L.RemovedImages)()
        with c._locked() as h:
            code = fn(h, *args, byref(ret))
            if code != Code.OK:
                c._raise(code)
        try:
            r = ret.contents
            return RemovedImages(names=_strv(r.names), freed_bytes=int(r.freed_bytes))
        finally:
            c._lib.sbx_removed_images_free(ret)

    def remove(self, name: str) -> RemovedImages:
        """Removes your name ``name`` of an image (a digest: all your names for it); the
        image goes when no name is left. :class:`FailedPrecondition` while a sandbox uses
        it."""
        return self._removed(self._client._lib.sbx_image_remove, name.encode())

    def prune(self) -> RemovedImages:
        """Removes every image of yours that no sandbox uses."""
        return self._removed(self._client._lib.sbx_image_prune)
