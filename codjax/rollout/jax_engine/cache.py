"""The JAX engine's cache slots: sessions and their slots (LRU eviction, retired prefixes), prefix sharing
between requests (within a call, and from resident or retired slots), and writing prompts into the cache in
bucketed chunks. A mixin of ``JaxEngine``."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from codjax.rollout.jax_engine.kernels import _bucket, _pack_chunk


def _cache_shardings(cache, mesh: Mesh):
  """Shardings of the sampler cache: slots over the batch axes, heads over ``tensor``. Qwen3's cache is
  (k^T, v); the hybrid's a dict named as ``codjax.models.qwen3_5.CACHE_LOGICAL_AXES``."""
  from codjax.parallel.sharding import activation_sharding, logical_to_spec

  if isinstance(cache, tuple):
    ck, cv = cache
    return (activation_sharding("cache_k_lbkhs", ck.shape, mesh), activation_sharding("cache_v_lbksh", cv.shape, mesh))
  from codjax.models.qwen3_5 import CACHE_LOGICAL_AXES

  return {n: jax.sharding.NamedSharding(mesh, logical_to_spec(CACHE_LOGICAL_AXES[n], v.shape, mesh))
          for n, v in cache.items()}


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
  """Length of the longest common prefix of two token lists."""
  n = min(len(a), len(b))
  neq = np.flatnonzero(np.asarray(a[:n], np.int64) != np.asarray(b[:n], np.int64))
  return int(neq[0]) if len(neq) else n


def _share_plan(prefixes: Sequence[Sequence[int] | None], partial: bool, min_share: int):
  """Which rows copy their prompt prefix from another row instead of computing it.

  ``prefixes[r]``: the tokens row r writes from cache position 0 (None: a row continuing a cached history).
  Returns (dup, part): ``dup[r] = q`` for a row whose prefix equals row q's (q the first row with it), and,
  when ``partial``, ``part[q] = (l, n)`` for a distinct prefix whose first n >= ``min_share`` tokens equal
  leader row l's (then it computes only its tokens from n on). Leaders are chosen in sorted order: a prefix
  shares with the last leader before it, which among the leaders before it has the longest common prefix."""
  dup: dict[int, int] = {}
  first: dict[tuple, int] = {}
  for r, p in enumerate(prefixes):
    if p:
      q = first.setdefault(tuple(p), r)
      if q != r:
        dup[r] = q
  part: dict[int, tuple[int, int]] = {}
  if partial:
    leader = None
    for q in sorted(first.values(), key=lambda r: list(prefixes[r])):
      n = _lcp(prefixes[leader], prefixes[q]) if leader is not None else 0
      if n >= min_share:
        part[q] = (leader, n)
      else:
        leader = q
  return dup, part


@dataclasses.dataclass
class _Session:
  slot: int | None  # None: evicted (its KV cache was given to another session; re-prefilled on next use)
  tokens: list[int]  # history whose first cached_len tokens are in the cache
  cached_len: int = 0
  last_used: int = 0


class CacheSlots:
  """Sessions, slots and prompt prefill (``JaxEngine`` mixes this in)."""

  def _take_slot(self, busy: set[int]) -> int:
    """A free slot (one without a retired prefix first, else the one retired first), evicting the least
    recently used session not in ``busy`` if none is free."""
    if self._free:
      plain = [slot for slot in self._free if slot not in self._retired]
      # a slot without a retired prefix if there is one, else the one retired first (dicts keep that order)
      slot = plain[-1] if plain else next(iter(self._retired))
      self._free.remove(slot)
      self._retired.pop(slot, None)
      return slot
    victims = [(s.last_used, k) for k, s in self._sessions.items() if s.slot is not None and k not in busy]
    if not victims:
      raise RuntimeError(f"JaxEngine: more concurrent requests than cache slots (max_slots={self.max_slots})")
    _, k = min(victims)
    s = self._sessions[k]
    slot, s.slot, s.cached_len = s.slot, None, 0
    self.stats["evictions"] += 1
    return slot

  def _session(self, sid: int | None, prompt: Sequence[int], busy: set[int]) -> tuple[int, _Session]:
    """The session of ``sid`` (new if unknown) holding a cache slot, with ``cached_len`` valid for ``prompt``."""
    if sid is not None and sid in self._sessions:
      s = self._sessions[sid]
      if s.slot is None:
        s.slot = self._take_slot(busy)
      elif not (len(prompt) >= s.cached_len and list(prompt[:s.cached_len]) == s.tokens[:s.cached_len]):
        s.cached_len = 0  # history diverged: re-prefill from scratch
    else:
      s = _Session(slot=self._take_slot(busy), tokens=[])
      if sid is None:
        self._anon += 1
        sid = -self._anon
      self._sessions[sid] = s
    self._clock += 1
    s.last_used = self._clock
    return sid, s

  def end_session(self, session_id: int) -> None:
    if any(r.sid == session_id for r in self._stream):
      raise RuntimeError(f"session {session_id} has a request in flight; poll it to completion first")
    s = self._sessions.pop(session_id, None)
    if s is not None and s.slot is not None:
      self._free.append(s.slot)
      if s.cached_len >= self.chunk_buckets[0] and getattr(self._model_cls, "PREFIX_COPY", False):
        self._retired[s.slot] = list(s.tokens[:s.cached_len])

  def num_sessions(self) -> int:
    return len(self._sessions)

  def _resident_prefix(self, prompt: Sequence[int], end: int, exclude: set[int]) -> tuple[int, int]:
    """(slot, n): the cache slot outside ``exclude`` whose valid prefix (a resident session's first
    ``cached_len`` tokens, or a retired slot's) shares the most first tokens, n, with ``prompt[:end]``;
    (0, 0) when none shares at least the smallest chunk bucket."""
    lo = self.chunk_buckets[0]
    if end < lo:
      return 0, 0
    head = list(prompt[:lo])
    cands = [(s.slot, s.tokens[:s.cached_len]) for s in self._sessions.values()
             if s.slot is not None and s.slot not in exclude and s.cached_len >= lo]
    cands += [(slot, toks) for slot, toks in self._retired.items() if slot not in exclude]
    best = (0, 0)
    for slot, toks in cands:
      if list(toks[:lo]) == head:  # cheap filter before the full comparison
        n = _lcp(prompt[:end], toks)
        if n > best[1]:
          best = (slot, n)
    return best

  def _prefill_prompts(self, slots: Sequence[int], starts: Sequence[int], prompts: Sequence[Sequence[int]],
                       min_rows: int | None = None, resident: bool = False):
    """Writes ``prompts[r][starts[r]:-1]`` into cache slot ``slots[r]`` (the last token is the decode kernel's
    to feed). Rows prefilled from position 0 share their prompts' common prefixes: requests with the same
    prompt (the G repeats of a pack's first turn) are prefilled once and copied, and on models whose cache
    rows can be cut at any position (``PREFIX_COPY``: plain attention; a hybrid's recurrent state exists only
    at a prompt's end) a prompt that starts with another's first tokens (a shared system prompt) copies them
    and prefills only the rest. ``stats["shared_tokens"]`` counts the tokens copied instead of computed, and
    ``stats["prefill_tokens"]`` (prompt tokens fed to the model) leaves them out. Kernels run at least
    ``min_rows`` rows (default ``min_batch``). With ``resident`` (continuous batching's arrivals), a leader
    prefilled from position 0 on a ``PREFIX_COPY`` model first copies the longest prefix it shares with a slot
    outside the call (``_resident_prefix``) and computes only the rest."""
    ends = [len(p) - 1 for p in prompts]
    partial = bool(getattr(self._model_cls, "PREFIX_COPY", False))
    dup, part = _share_plan([list(p[:e]) if st == 0 else None for p, st, e in zip(prompts, starts, ends)],
                            partial, self.chunk_buckets[0])
    # 1. rows that compute their prompt from their start: leaders, and rows continuing a cached history; a
    # leader from position 0 starts past the prefix it copies from a resident slot (resident mode)
    first = [r for r in range(len(prompts)) if r not in dup and r not in part and ends[r] > starts[r]]
    begin = {r: starts[r] for r in first}
    if resident and partial:
      exclude = set(slots)
      ext = [(slots[r], r) + self._resident_prefix(prompts[r], ends[r], exclude) for r in first if starts[r] == 0]
      ext = [(dst, r, src, n) for dst, r, src, n in ext if n > 0]
      self._copy_rows([(src, dst, n) for dst, _, src, n in ext], min_rows)
      for _, r, _, n in ext:
        begin[r] = n
      shared_ext = sum(n for _, _, _, n in ext)
      self.stats["shared_tokens"] += shared_ext
      self.stats["prefill_tokens"] -= shared_ext
    self._prefill_rows([slots[r] for r in first], [begin[r] for r in first],
                       [prompts[r][begin[r]:ends[r]] for r in first], min_rows)
    # 2. copies from leaders (shared prefixes, and duplicates of leaders); then the rest of each shared prefix
    copies = ([(slots[part[r][0]], slots[r], part[r][1]) for r in part]
              + [(slots[q], slots[r], ends[r]) for r, q in dup.items() if q not in part])
    # 3. duplicates of rows completed in 2
    later = [(slots[q], slots[r], ends[r]) for r, q in dup.items() if q in part]
    self._copy_rows(copies, min_rows)
    rest = [r for r in part if ends[r] > part[r][1]]
    self._prefill_rows([slots[r] for r in rest], [part[r][1] for r in rest],
                       [prompts[r][part[r][1]:ends[r]] for r in rest], min_rows)
    self._copy_rows(later, min_rows)
    shared = sum(n for _, _, n in copies + later)
    self.stats["shared_tokens"] += shared
    self.stats["prefill_tokens"] -= shared

  def _copy_rows(self, copies, min_rows: int | None = None) -> None:
    """For each (source slot, destination slot, n): copies cache positions [0, n) (and a hybrid's recurrent
    state) of the source slot to the destination; batched per length bucket, padded to a power of two with
    scratch-to-scratch copies."""
    groups: dict[int, list] = {}
    for c in copies:
      groups.setdefault(self._length_bucket(c[2]), []).append(c)
    for length, rows in groups.items():
      bb = self._batch_bucket(len(rows), min_rows)
      s = np.array([q for q, _, _ in rows] + [0] * (bb - len(rows)), np.int32)
      d = np.array([r for _, r, _ in rows] + [0] * (bb - len(rows)), np.int32)
      self._cache = self._copy_fn(self._cache, jnp.asarray(s), jnp.asarray(d), length=length)

  def _chunk_len(self, remaining: int) -> int:
    """The chunk for a group's next ``remaining`` tokens: the smallest bucket that holds them, unless the next
    smaller bucket followed by the bucket of what is left is at most 3/4 of its size (a 259-token prompt runs
    as 256 + 16 slots instead of 512; 20 tokens stay one 32-slot chunk)."""
    c = _bucket(remaining, self.chunk_buckets)
    smaller = [b for b in self.chunk_buckets if b < c]
    if smaller and remaining > smaller[-1]:
      split = smaller[-1] + _bucket(remaining - smaller[-1], self.chunk_buckets)
      if 4 * split <= 3 * c:
        return smaller[-1]
    return c

  def _prefill_rows(self, slots: Sequence[int], starts: Sequence[int], suffixes: Sequence[Sequence[int]],
                    min_rows: int | None = None) -> None:
    """Writes ``suffixes[r]`` into cache slot ``slots[r]`` from position ``starts[r]``. Chunks of a bucketed
    length; rows are grouped by suffix-length bucket so a short next-turn suffix is never padded to a long
    one, and a chunk runs only the rows that still have tokens in it."""
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(suffixes):
      if len(x):
        groups.setdefault(_bucket(len(x), self.chunk_buckets), []).append(i)
    for rows in groups.values():
      done_tokens = 0
      longest = max(len(suffixes[i]) for i in rows)
      while done_tokens < longest:
        active = [i for i in rows if len(suffixes[i]) > done_tokens]
        c = self._chunk_len(max(len(suffixes[i]) for i in active) - done_tokens)
        c = min(c, self.max_seq_len - max(int(starts[i]) + done_tokens for i in active))
        ba = self._batch_bucket(len(active), min_rows if min_rows is not None else self._prefill_floor(c))
        chunk = np.zeros((ba, c), np.int32)
        valid = np.zeros((ba,), np.int32)
        cstart = np.zeros((ba,), np.int32)
        slots_a = np.zeros((ba,), np.int32)  # padding rows write to the scratch slot 0
        for r, i in enumerate(active):
          piece = suffixes[i][done_tokens:done_tokens + c]
          chunk[r, :len(piece)] = piece
          valid[r] = len(piece)
          cstart[r] = starts[i] + done_tokens
          slots_a[r] = slots[i]
        length = self._length_bucket(int(cstart.max()) + c)
        if self._packed_prefill:
          tokens, to_bc, to_n = _pack_chunk(chunk, valid)
          self._cache = self._prefill_packed_fn(
              self._weights(), self._cache, jnp.asarray(slots_a), jnp.asarray(tokens), jnp.asarray(cstart),
              jnp.asarray(to_bc), jnp.asarray(to_n), chunk_shape=(ba, c), length=length)
        else:
          self._cache = self._prefill_fn(self._weights(), self._cache, jnp.asarray(slots_a), jnp.asarray(chunk),
                                         jnp.asarray(cstart), jnp.asarray(valid), length=length)
        done_tokens += c
