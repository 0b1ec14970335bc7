"""Positions of many array slices at once, without a Python loop over the slices."""

from __future__ import annotations

import numpy as np


def slice_positions(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every position of the slices [starts[i], ends[i]), slice after slice, and where each
    slice begins among them."""
    lengths = ends - starts
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum())) + np.repeat(starts - offsets, lengths), offsets
