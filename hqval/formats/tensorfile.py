"""qt-tagged tensor files: every tensor the suite saves says which format its bytes are in,
and loading it as another format is refused (design note 1e: no format consumes another
format's bytes).

A file is an uncompressed ``.npz`` holding ``magic``, ``version``, ``qt``, ``K``, ``data``
and ``meta`` (a JSON string).  ``qt = 0`` (``QT_F32``) tags unquantized float32 weights.
Version 1 files tagged HFQ4G256 as qt=1 (the engine's F16 id); they load as qt=6, the
engine's HFQ4G256.  Writes go to a temporary file in the same directory and are renamed
into place, so a failed save leaves nothing partial behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = "hqval-tensor"
VERSION = 2
QT_F32 = 0
# version -> {qt written by that version: the qt it means now}
_QT_RENAMES: dict[int, dict[int, int]] = {1: {1: 6}}


@dataclass(frozen=True)
class TensorFile:
    qt: int
    K: int
    data: npt.NDArray[Any]
    meta: dict[str, Any] = field(default_factory=dict)


def _describe(qt: int) -> str:
    if qt == QT_F32:
        return "qt=0 (float32 weights)"
    from hqval.formats import by_qt

    try:
        return f"qt={qt} ({by_qt(qt).name})"
    except KeyError:
        return f"qt={qt} (unknown format)"


def save_tensor(
    path: str | os.PathLike[str], data: npt.ArrayLike, qt: int,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Save ``data`` tagged with ``qt``: a blob from ``by_qt(qt).encode`` or, for
    ``qt=0``, float32 weights [M, K].  The data is checked against the format first."""
    from hqval.formats import by_qt

    arr = np.asarray(data)
    if qt == QT_F32:
        if arr.dtype != np.float32 or arr.ndim != 2:
            raise ValueError(
                f"qt=0 tensors are float32 [M, K], got {arr.dtype} {arr.shape}; pass the "
                f"weights as float32 or pass the qt of the format that produced the blob"
            )
        K = int(arr.shape[1])
    else:
        fmt = by_qt(qt)
        if arr.ndim != 2:
            raise ValueError(f"{fmt.name}: blob has shape {arr.shape}, expected 2-D")
        if arr.shape[1] == 0 or arr.shape[1] % fmt.group_bytes:
            raise ValueError(
                f"{fmt.name}: blob rows are {arr.shape[1]} bytes, not a whole number of "
                f"qt={qt} groups (stride {fmt.group_bytes} B); the blob is another format"
            )
        K = int(arr.shape[1]) // fmt.group_bytes * 256
        fmt.check_blob(arr, K)
    meta_json = json.dumps(meta or {}, sort_keys=True)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, magic=np.array(MAGIC), version=np.array(VERSION), qt=np.array(qt),
                     K=np.array(K), data=arr, meta=np.array(meta_json))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_tensor(path: str | os.PathLike[str], qt: int) -> TensorFile:
    """Load a tensor saved by ``save_tensor``; ``qt`` is the format the caller will
    interpret the bytes as, and must match the file's tag."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            fields = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{p}: not a readable hqval tensor file ({exc})") from exc
    if str(fields.get("magic", "")) != MAGIC:
        raise ValueError(f"{p}: not an hqval tensor file (no '{MAGIC}' tag); save it with "
                         f"hqval.formats.save_tensor so it carries its qt")
    version = int(fields["version"])
    if version != VERSION and version not in _QT_RENAMES:
        raise ValueError(f"{p}: tensor file version {version}, this hqval reads {VERSION} "
                         f"(and migrates {sorted(_QT_RENAMES)})")
    file_qt = int(fields["qt"])
    file_qt = _QT_RENAMES.get(version, {}).get(file_qt, file_qt)
    if file_qt != qt:
        raise ValueError(
            f"{p}: file holds {_describe(file_qt)} but was opened as {_describe(qt)}; no "
            f"format consumes another format's bytes: load it with qt={file_qt}, or decode "
            f"it and re-encode from the original weights"
        )
    K = int(fields["K"])
    data = fields["data"]
    if qt != QT_F32:
        from hqval.formats import by_qt

        by_qt(qt).check_blob(data, K)
    meta = json.loads(str(fields["meta"]))
    return TensorFile(qt=file_qt, K=K, data=data, meta=meta)
