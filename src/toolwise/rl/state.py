"""State (de)serialisation: a `state_dict()` tree (plain data plus numpy arrays) as bytes and back.

The bytes are a zip holding `tree.json` (arrays replaced by references) and one `.npy` per array,
written with fixed timestamps: the same state always gives the same bytes (and checksum). Loading
never unpickles.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np

_EPOCH = (1980, 1, 1, 0, 0, 0)
_REF = "__ndarray__"


def pack(state: Any, *, deflate: bool = True) -> bytes:
    """The state as bytes; `deflate=False` stores every array as it is (a stopping server, short of
    time: packing without deflating is faster, at about twice the bytes)."""
    arrays: list[np.ndarray] = []

    def strip(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            arrays.append(value)
            return {_REF: len(arrays) - 1}
        if isinstance(value, dict):
            if _REF in value:
                raise ValueError(f"state keys must not be {_REF!r}")
            return {str(k): strip(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [strip(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, bool | int | float | str):
            return value
        raise TypeError(f"cannot pack {type(value).__name__} into a state")

    tree = json.dumps(strip(state), sort_keys=True, separators=(",", ":")).encode()
    buffer = io.BytesIO()
    # Float arrays are stored as they are: they deflate by a quarter at most, and deflating a year's
    # state is slow next to the time a client gives a stopping server. Integer arrays
    # (n-gram ids and counts) deflate to a fraction, fast at level 1. Any snapshot loads either way.
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(zipfile.ZipInfo("tree.json", _EPOCH), tree, zipfile.ZIP_DEFLATED)
        for i, array in enumerate(arrays):
            data = io.BytesIO()
            np.lib.format.write_array(data, np.ascontiguousarray(array), allow_pickle=False)
            method = zipfile.ZIP_STORED if array.dtype.kind in "fc" or not deflate else zipfile.ZIP_DEFLATED
            archive.writestr(zipfile.ZipInfo(f"{i}.npy", _EPOCH), data.getvalue(), method)
    return buffer.getvalue()


def contents(data: bytes) -> tuple[tuple[str, int, int], ...]:
    """What a packed state holds, whichever of its arrays were deflated: each member's name, CRC-32 and size
    uncompressed, read from the archive's directory (nothing inflated). Two packings of one state are equal here."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return tuple((info.filename, info.CRC, info.file_size) for info in archive.infolist())


def unpack(data: bytes) -> Any:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            tree = json.loads(archive.read("tree.json"))

            def restore(value: Any) -> Any:
                if isinstance(value, dict):
                    if _REF in value:
                        with archive.open(f"{value[_REF]}.npy") as f:
                            return np.lib.format.read_array(f, allow_pickle=False)
                    return {k: restore(v) for k, v in value.items()}
                if isinstance(value, list):
                    return [restore(v) for v in value]
                return value

            return restore(tree)
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"not a packed learner state: {exc}") from exc
