"""Secret-word lists for Hangman and Wordle, read offline from the ``wonderwords`` wheel (MIT, no dependencies).

Reference (axon-rl/gem ``gem/envs/game_env/hangman.py`` and ``wordle.py``): GEM draws the secret uniformly from
nltk's ``words.words("en-basic")`` (Ogden's Basic English, about 850 words) after keeping lowercase alphabetic
words of the game's length (3 for Hangman, 5 for Wordle), and upper-cases it. nltk's corpora ship only through
``nltk.download`` (a network fetch at run time), so codjax reads the noun, adjective and verb lists that the
``wonderwords`` wheel ships (``wonderwords/assets/*.txt``), keeps lowercase ASCII alphabetic words of the length,
drops the words on wonderwords' own profanity list, and sorts the union (``vocabulary(n)``).

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
#: word categories of ``pool`` ("all" is ``vocabulary``; the others are one wonderwords list each)
CATEGORIES = {"all": _LISTS, "noun": ("nounlist.txt",), "adjective": ("adjectivelist.txt",),
              "verb": ("verblist.txt",)}
#: the rarest letters of English text (the evolution's "rare letter" skill, codjax's;
#: docs/methods/environment_evolution.md)
RARE_LETTERS = "JQXZKV"


def _asset_words(name: str) -> list[str]:
  return (importlib.resources.files("wonderwords") / "assets" / name).read_text(encoding="utf-8").splitlines()


@functools.cache
def vocabulary(length: int, category: str = "all") -> tuple[str, ...]:
  """Sorted upper-case words of ``length`` letters (see module docstring); empty when none exist.
  ``category`` keeps the words of one list of ``CATEGORIES`` (still inside the full vocabulary)."""
  if category not in CATEGORIES:
    raise ValueError(f"word category must be one of {sorted(CATEGORIES)}, got {category!r}")
  banned = {w.strip().lower() for w in _asset_words("profanitylist.txt")}
  words = set()
  for name in CATEGORIES[category]:
    for w in _asset_words(name):
      w = w.strip()
      if len(w) == length and w.isascii() and w.isalpha() and w.islower() and w not in banned:
        words.add(w.upper())
  return tuple(sorted(words))


@functools.cache
def pool(length: int, category: str = "all", min_rare: int = 0, min_repeats: int = 0) -> tuple[str, ...]:
  """The secret pool of an evolved Hangman/Wordle (docs/methods/environment_evolution.md): words of
  ``vocabulary(length, category)`` holding at least ``min_rare`` letters of ``RARE_LETTERS`` (counted with
  repetition) and at least ``min_repeats`` repeated letters (length minus distinct letters). The defaults give
  ``vocabulary(length)``."""
  return tuple(w for w in vocabulary(length, category)
               if sum(ch in RARE_LETTERS for ch in w) >= min_rare and len(w) - len(set(w)) >= min_repeats)


def secret_pool_args(category: str, min_rare: int, min_repeats: int, length: int) -> None:
  """Validates the secret-pool knobs of a Hangman/Wordle config (ValueError when the pool is empty)."""
  from codjax.envs import helpers

  if category not in CATEGORIES:
    raise ValueError(f"category must be one of {sorted(CATEGORIES)}, got {category!r}")
  helpers.check_int("min_rare", min_rare, 0, length)
  helpers.check_int("min_repeats", min_repeats, 0, length - 1)
  if not pool(length, category, min_rare, min_repeats):
    raise ValueError(f"no {length}-letter {category} word with at least {min_rare} rare letter(s) and "
                     f"{min_repeats} repeated letter(s)")


def category_line(category: str) -> str:
  """The instruction sentence naming a non-default category ('' for "all")."""
  if category == "all":
    return ""
  article = "an" if category[0] in "aeiou" else "a"
  return f" The secret word is {article} {category}."
