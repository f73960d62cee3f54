"""bf16 as numpy uint16 bit patterns (how linfuse's Python API takes and
returns bf16 arrays), for the tests that build bf16 inputs."""

import numpy as np


def to_bf16(a):
    """f32 values rounded to nearest even, as bf16 bit patterns."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b):
    """bf16 bit patterns as the f32 values they hold (exactly)."""
    return (np.asarray(b, np.uint32) << 16).view(np.float32)
