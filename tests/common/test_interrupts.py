"""codjax.common.interrupts: a SIGTERM whose KeyboardInterrupt Python drops (raised inside a finalizer or a gc
callback) is remembered, and ``check()`` raises it at the loops' safe points; a plain SIGTERM still raises at
once."""

import signal

import pytest

from codjax.common import interrupts


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_dropped_by_a_finalizer_is_raised_by_check(dropped_sigterm):
  assert interrupts.requested() is None
  interrupts.check()  # nothing requested: a no-op
  dropped_sigterm()  # returns normally: the handler's exception did not get out of the finalizer
  assert interrupts.requested() == "signal SIGTERM"
  with pytest.raises(KeyboardInterrupt, match="signal SIGTERM"):
    interrupts.check()
  with pytest.raises(KeyboardInterrupt):  # and again: the request stays until reset
    interrupts.check()
  interrupts.reset()
  interrupts.check()


def test_a_plain_sigterm_raises_where_it_arrives(dropped_sigterm):
  del dropped_sigterm  # the fixture installs the handler and restores the old one
  with pytest.raises(KeyboardInterrupt, match="signal SIGTERM"):
    signal.raise_signal(signal.SIGTERM)
  assert interrupts.requested() == "signal SIGTERM"
