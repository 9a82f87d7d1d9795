"""Compiled or interpreted: the one place the kernels (``_pcapio``, ``_decode``,
``_expert_kernel``, ``_metrics_kernel``) get their ``njit``.

Compiled (numba) is the default and what any capture of size needs. But a process that
reads one tiny capture pays more for the compiler than for the work: importing numba
(~0.08 s) and loading every kernel's cached machine code (~0.25 s), against a few
milliseconds to run the same kernels as plain Python on a few hundred packets. So
:func:`interpret_if_small`, called before the kernels are first imported, lets such a
process run them as Python (the functions exactly as written, which is also what
``NUMBA_DISABLE_JIT=1`` runs); once they are imported the choice is fixed for the process.
The two give the same tables (``tests/analysis/test_jit.py``).
"""

from __future__ import annotations

import os
import sys
from typing import Iterable

__all__ = ["njit", "interpret_if_small", "interpreted", "INTERPRET_MAX_BYTES"]

#: Captures up to this many bytes in all are read interpreted by a process that chooses
#: before the kernels load. Measured: a 32 KB, 108-packet capture takes as long either way
#: (~20 ms of interpreted kernels against ~0.3 s of numba's start); the interpreted kernels
#: run ~10 µs a packet, so beyond this the compiler pays for itself.
INTERPRET_MAX_BYTES = 64 * 1024

_KERNELS = ("_pcapio", "_decode", "_expert_kernel", "_metrics_kernel")
_interpret = False


def interpreted() -> bool:
    """Whether this process's kernels run as plain Python."""
    return _interpret


def interpret_if_small(paths: Iterable[str | os.PathLike]) -> bool:
    """Run the kernels as Python in this process when ``paths`` (files) hold at most
    :data:`INTERPRET_MAX_BYTES` in all and no kernel is loaded yet; True when they will."""
    global _interpret
    if any(f"{__package__}.{name}" in sys.modules for name in _KERNELS):
        return _interpret
    try:
        total = sum(os.path.getsize(p) for p in paths)
    except OSError:  # the reader names the file in its own error
        return _interpret
    _interpret = _interpret or total <= INTERPRET_MAX_BYTES
    return _interpret


def njit(*args, **options):
    """``numba.njit`` (``@njit`` or ``@njit(cache=True, …)``), or the function itself when
    this process interprets its kernels; numba is then never imported."""
    if _interpret:
        if len(args) == 1 and callable(args[0]) and not options:
            return args[0]
        return lambda func: func
    # Imported here, not at the top: an interpreting process never needs numba (~0.08 s).
    import numba

    return numba.njit(*args, **options)
