"""Zero-copy views of the buffers of Arrow string/binary arrays, for numpy kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (rebased to 0, int64, len(arr) + 1) and the data bytes those offsets cover,
    of a (large) string or binary array; slices are honoured."""
    t = arr.type
    width = np.int64 if (pa.types.is_large_string(t) or pa.types.is_large_binary(t)) \
        else np.int32
    _, off_buf, data_buf = arr.buffers()[:3]
    offsets = np.frombuffer(off_buf, dtype=width, count=len(arr) + 1,
                            offset=arr.offset * np.dtype(width).itemsize).astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = (np.frombuffer(data_buf, dtype=np.uint8, count=hi - lo, offset=lo)
            if data_buf is not None and hi > lo else np.zeros(0, dtype=np.uint8))
    return offsets - lo, data
