"""ONNX external data: tensors whose bytes live in a separate file, read safely.

An ONNX tensor with ``data_location = EXTERNAL`` names a file (``location``), an ``offset`` and a
``length``. onnx's own helpers resolve ``location`` against a ``base_dir`` argument that defaults
to the current directory, so a model parsed from bytes (as the frontend does) and passed to
``numpy_helper.to_array`` would read whatever file of that name the user's shell is in — a
model in /tmp run from $HOME could read ``.ssh/id_rsa`` into its weights and out through its
outputs. Here the model's external data is resolved and read once, by us, before anything
else sees the model:

- ``location`` is relative, without a ``..`` component, and resolves (``os.path.realpath``,
  symlinks followed) inside the real directory of the model file;
- the file is a regular file, and ``offset + length`` lies inside it;
- the bytes match the tensor's shape and type, and all external bytes of a model stay under
  :data:`MAX_EXTERNAL_BYTES`.

Every tensor of the model is covered: initializers, sparse initializers, tensor attributes
(Constant's ``value``), and those of subgraphs and functions. Anything else is refused with a
:class:`~npu_byoc.errors.ModelLoadError` naming the model, the tensor and the problem. After
:func:`load` the model holds every byte in memory, so no onnx or TVM helper downstream ever
opens a file for it.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..util import escape
from ..errors import ModelLoadError

# Far above any model an int8 NPU of this size runs; below protobuf's 2 GB message limit, so a
# model with its data embedded (:func:`embedded_bytes`) still serializes.
MAX_EXTERNAL_BYTES = 1 << 30

_EXTERNAL = 1  # onnx.TensorProto.EXTERNAL
_KEYS = {"location", "offset", "length", "checksum"}
_PACKED_4BIT = {21, 22, 23}  # UINT4, INT4, FLOAT4E2M1: two elements a byte


@dataclass(frozen=True)
class ExternalRef:
    """One tensor's external data after validation: ``file`` is the real path, inside the model's
    real directory; ``offset`` / ``length`` lie inside the file."""

    tensor: str
    location: str
    file: str
    offset: int
    length: int


def model_dir(path: str | Path) -> str:
    """The directory external data is looked for in: the real directory of the model file (a
    symlinked model reads its data next to the file it points to, never next to the link)."""
    return os.path.dirname(os.path.realpath(path))


def _all_tensors(model) -> Iterator:
    """Every TensorProto of ``model``: graph initializers and sparse initializers, tensor
    attributes (single and lists, dense and sparse), recursively through subgraphs and the
    model's functions."""

    def of_sparse(sp):
        yield sp.values
        yield sp.indices

    def of_nodes(nodes):
        for node in nodes:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors
                if a.HasField("sparse_tensor"):
                    yield from of_sparse(a.sparse_tensor)
                for sp in a.sparse_tensors:
                    yield from of_sparse(sp)
                if a.HasField("g"):
                    yield from of_graph(a.g)
                for g in a.graphs:
                    yield from of_graph(g)

    def of_graph(g):
        yield from g.initializer
        for sp in g.sparse_initializer:
            yield from of_sparse(sp)
        yield from of_nodes(g.node)

    yield from of_graph(model.graph)
    for f in model.functions:
        yield from of_nodes(f.node)


def _needed_bytes(tensor) -> int | None:
    """The raw byte size of ``tensor``'s shape and type (None: a type with no fixed size)."""
    from onnx import helper

    n = math.prod(int(d) for d in tensor.dims)
    if tensor.data_type in _PACKED_4BIT:
        return (n + 1) // 2
    try:
        return n * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except Exception:  # STRING, UNDEFINED or a type this onnx does not know
        return None


def _problem(path, tensor, location: str, what: str) -> ModelLoadError:
    name = escape.clean(tensor.name or "<unnamed>")
    where = f" '{escape.clean(location)}'" if location else ""
    return ModelLoadError(f"{path}: tensor '{name}': external data{where} {what}")


def _resolve(path, tensor, base: str) -> ExternalRef:
    """``tensor``'s external data, checked against the model's real directory ``base`` and the
    file's size (not read)."""
    entries = {}
    for e in tensor.external_data:
        if e.key == "basepath" and not e.value:
            continue  # written empty by some onnx versions
        if e.key not in _KEYS:
            raise _problem(path, tensor, "", f"has the key '{escape.clean(e.key)}' (only location, offset, length, checksum are read)")
        entries[e.key] = e.value
    loc = entries.get("location", "")
    if not loc:
        raise _problem(path, tensor, "", "names no file (no 'location')")
    if "\0" in loc:
        raise _problem(path, tensor, loc, "is not a valid file name")
    parts = loc.replace("\\", "/").split("/")
    if os.path.isabs(loc) or loc.startswith(("/", "\\")) or (len(loc) > 1 and loc[1] == ":"):
        raise _problem(path, tensor, loc, "is an absolute path (it must be relative to the model's folder)")
    if ".." in parts:
        raise _problem(path, tensor, loc, "has a '..' component (it must stay in the model's folder)")
    try:
        offset = int(entries.get("offset", "0"))
        length = int(entries["length"]) if "length" in entries else None
    except ValueError:
        raise _problem(path, tensor, loc, "has an offset or length that is not an integer") from None
    if offset < 0 or (length is not None and length < 0):
        raise _problem(path, tensor, loc, "has a negative offset or length")
    real = os.path.realpath(os.path.join(base, loc))
    if os.path.commonpath([real, base]) != base:
        raise _problem(path, tensor, loc, f"resolves outside the model's folder {base} (a symlink?)")
    try:
        st = os.stat(real)
    except OSError as err:
        raise _problem(path, tensor, loc, f"cannot be read from {base} ({err.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _problem(path, tensor, loc, "is not a regular file")
    if length is None:
        length = st.st_size - offset
    if offset + length > st.st_size or length < 0:
        raise _problem(path, tensor, loc, f"offset {offset} + length {length} is past the file's end ({st.st_size} bytes)")
    needed = _needed_bytes(tensor)
    if needed is None:
        raise _problem(path, tensor, loc, f"is of ONNX type {tensor.data_type}, which cannot be stored externally")
    if length != needed:
        raise _problem(path, tensor, loc, f"has {length} bytes, its shape {list(tensor.dims)} needs {needed}")
    return ExternalRef(tensor.name, loc, real, offset, length)


def _external(model) -> list:
    return [t for t in _all_tensors(model) if t.data_location == _EXTERNAL]


def refs(path: str | Path, model) -> list[ExternalRef]:
    """Every external-data reference of ``model`` (the ONNX file ``path``), validated; raises
    :class:`ModelLoadError` at the first one that is refused."""
    base = model_dir(path)
    out, total = [], 0
    for tensor in _external(model):
        ref = _resolve(path, tensor, base)
        total += ref.length
        if total > MAX_EXTERNAL_BYTES:
            raise _problem(path, tensor, ref.location, f"takes the model's external data past {MAX_EXTERNAL_BYTES} bytes")
        out.append(ref)
    return out


def load(path: str | Path, model) -> None:
    """Read every external tensor of ``model`` into it (validated as :func:`refs` does):
    afterwards no tensor of the model refers to a file."""
    tensors = _external(model)
    if not tensors:
        return
    for tensor, ref in zip(tensors, refs(path, model)):
        # Opened without following a symlink and checked again: the file the checks saw.
        try:
            fd = os.open(ref.file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as err:
            raise _problem(path, tensor, ref.location, f"cannot be read ({err.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            # O_NOFOLLOW guards only the last component: a folder swapped for a symlink since the
            # checks shows in the opened file's own path (Linux).
            opened = f"/proc/self/fd/{fd}"
            moved = os.path.exists(opened) and os.path.realpath(opened) != ref.file
            if moved or not stat.S_ISREG(st.st_mode) or ref.offset + ref.length > st.st_size:
                raise _problem(path, tensor, ref.location, "changed while it was read")
            f.seek(ref.offset)
            data = f.read(ref.length)
        if len(data) != ref.length:
            raise _problem(path, tensor, ref.location, "changed while it was read")
        tensor.raw_data = data
        tensor.data_location = 0  # DEFAULT
        del tensor.external_data[:]


def external_files(path: str | Path) -> list[str]:
    """The real paths of the files the ONNX model ``path``'s external data is read from, sorted,
    after the checks of :func:`refs` (raises :class:`ModelLoadError` as loading would). Empty for
    a model with no external data, and for a file that is not ONNX (loading says why)."""
    import onnx

    try:
        model = onnx.load_from_string(Path(path).read_bytes())
    except Exception:
        return []
    return sorted({r.file for r in refs(path, model)})


def embedded_bytes(path: str | Path) -> bytes:
    """The ONNX model ``path`` serialized with its external data inside: one file that loads
    anywhere (a Ray worker on another node)."""
    import onnx

    data = Path(path).read_bytes()
    try:
        model = onnx.load_from_string(data)
    except Exception:
        return data
    if not _external(model):
        return data
    load(path, model)
    return model.SerializeToString()


__all__ = ["MAX_EXTERNAL_BYTES", "ExternalRef", "model_dir", "refs", "load", "external_files", "embedded_bytes"]
