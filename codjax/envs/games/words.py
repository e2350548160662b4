"""Secret-word lists for Hangman and Wordle, read offline from the ``wonderwords`` wheel (MIT, no dependencies).

Reference (orbit_evo.md A.3): GEM draws the secret uniformly from nltk's ``words.words("en-basic")`` (Ogden's
Basic English, about 850 words) after keeping lowercase alphabetic words of the game's length (3 for
Hangman, 5 for Wordle), and upper-cases it. nltk's corpora ship only through ``nltk.download`` (a network
fetch at run time), so codjax reads the noun, adjective and verb lists that the ``wonderwords`` wheel
ships (``wonderwords/assets/*.txt``), keeps lowercase ASCII alphabetic words of the length, drops the
words on wonderwords' own profanity list, and sorts the union (``vocabulary(n)``).

How the distribution differs: Basic English is a deliberately small list of very common words (few dozen
of length 3, about a hundred of length 5); ours is the same part-of-speech mix (mostly nouns, some
adjectives and verbs) but larger and with rarer entries (3 letters: 302 words such as CAT, JOB, but also ALB,
OBI, LOX; 5 letters: 1,182 words). Secrets are therefore harder to guess from prior frequency, and a player
that knows the list (the scripted players do) faces more candidates per pattern than under en-basic.
Wordle guesses are not checked against any dictionary in faithful mode (GEM's quirk); with
``faithful=False`` a guess must be in ``vocabulary(word_length)``.
"""

from __future__ import annotations

import functools
import importlib.resources

_LISTS = ("nounlist.txt", "adjectivelist.txt", "verblist.txt")


def _asset_words(name: str) -> list[str]:
  return (importlib.resources.files("wonderwords") / "assets" / name).read_text(encoding="utf-8").splitlines()


@functools.cache
def vocabulary(length: int) -> tuple[str, ...]:
  """Sorted upper-case words of ``length`` letters (see module docstring); empty when none exist."""
  banned = {w.strip().lower() for w in _asset_words("profanitylist.txt")}
  words = set()
  for name in _LISTS:
    for w in _asset_words(name):
      w = w.strip()
      if len(w) == length and w.isascii() and w.isalpha() and w.islower() and w not in banned:
        words.add(w.upper())
  return tuple(sorted(words))
