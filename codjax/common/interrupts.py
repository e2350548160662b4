"""A scheduler's stop (SIGTERM) that unwinds like Ctrl-C and cannot be lost.

Python runs a signal handler in the main thread between two bytecodes of whatever that thread is executing. A
handler that only raises ``KeyboardInterrupt`` loses the stop when that code is one whose exceptions the
interpreter reports and drops: a garbage-collection callback (JAX registers one), a ``__del__``, a weakref
callback. The run then prints "Exception ignored in ..." and goes on to its end (seen in CI: an evaluation sent
SIGTERM after its first pack finished all eight).

So :func:`install` makes the handler record the request before it raises, and the long loops call :func:`check`
at their safe points (after each written evaluation pack, after each training step), which raises the
``KeyboardInterrupt`` again if the first one was dropped. Launch scripts catch it as they catch Ctrl-C.
"""

from __future__ import annotations

import signal

_requested: str | None = None  # "signal SIGTERM" once a signal arrived


def _on_signal(signum, frame) -> None:
  global _requested
  del frame
  _requested = f"signal {signal.Signals(signum).name}"
  raise KeyboardInterrupt(_requested)


def install(*signums: int) -> None:
  """Handles ``signums`` (default: SIGTERM) as above; call from the main thread, before the work starts."""
  for s in signums or (signal.SIGTERM,):
    signal.signal(s, _on_signal)


def requested() -> str | None:
  """``"signal <NAME>"`` once an installed signal arrived (whether or not its exception got through), else None."""
  return _requested


def check() -> None:
  """Raises ``KeyboardInterrupt("signal <NAME>")`` if an installed signal arrived; a no-op otherwise."""
  if _requested is not None:
    raise KeyboardInterrupt(_requested)


def reset() -> None:
  """Forgets a request (for a process that handled the stop and goes on, e.g. a test)."""
  global _requested
  _requested = None
