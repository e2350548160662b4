"""ORBIT evaluation metrics over multi-episode trajectories (ORBIT paper sections 2, 3.1 and 4.4 with Tables 2
and 4; docs/methods/orbit.md).

Input: N trajectories (one task instance each) of T episodes, as a success matrix ``S[n, e]`` in {0, 1}.
Ragged input is allowed: episodes beyond T are ignored, missing episodes count as failures (ORBIT counts an
episode cut off by the step cap as attempted and failed). Optionally, per trajectory and episode, the
states visited in that episode (``info["state_key"]`` of its steps plus the env's ``initial_state_key``).

* Per-episode success rate p_e = mean_n S[n, e], e = 1..T (``episode_e/success_rate``).
* Success count R(M; tau) = sum_e S[n, e] (paper sec. 3.1), its mean (``episode/success_count``), and the
  share of trajectories with any success (``episode/success_rate``).
* In-context regret (paper sec. 2): Reg_k = k J* - sum_{e<=k} p_e for k = 1..T, where J* is the optimal
  per-episode success when the instance is known (1 for all seven games except Blackjack instances whose
  dealer total cannot be beaten and RPS, whose J* is the best response's 0.80; pass it per game).
* Regret against an oracle: sum_{e<=k} (p^oracle_e - p_e), the gap to a reference player's curve.
* Exploration under failure (paper Table 4): DeltaStates(Ep k | F1..k-1) = the mean, over trajectories that
  failed every episode before k, of |states(k) minus the union of states(1..k-1)|, for k = 2..T, with the
  number of such trajectories.
* Unique states over a whole trajectory (ORBIT's ``maze/unique_visited_states``).
"""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence

import numpy as np


def success_matrix(successes: Sequence[Sequence[bool]], episodes: int) -> np.ndarray:
  """``[N, T]`` float array of 0/1 from ragged per-trajectory episode outcomes (missing = failure)."""
  if episodes < 1:
    raise ValueError(f"episodes must be >= 1, got {episodes}")
  out = np.zeros((len(successes), episodes), dtype=np.float64)
  for n, row in enumerate(successes):
    row = [bool(x) for x in list(row)[:episodes]]
    out[n, :len(row)] = row
  return out


def per_episode_success(s: np.ndarray) -> np.ndarray:
  """p_e for e = 1..T (``[T]``; NaN when there are no trajectories)."""
  return s.mean(axis=0) if len(s) else np.full(s.shape[1], np.nan)


def success_count(s: np.ndarray) -> float:
  """Mean number of successful episodes per trajectory."""
  return float(s.sum(axis=1).mean()) if len(s) else float("nan")


def any_success_rate(s: np.ndarray) -> float:
  return float((s.sum(axis=1) > 0).mean()) if len(s) else float("nan")


def in_context_regret(s: np.ndarray, j_star: float = 1.0) -> np.ndarray:
  """Reg_k = k J* - sum_{e<=k} p_e, k = 1..T."""
  p = per_episode_success(s)
  return np.arange(1, len(p) + 1) * j_star - np.cumsum(p)


def oracle_regret(s: np.ndarray, oracle_rates: Sequence[float]) -> np.ndarray:
  """sum_{e<=k} (p^oracle_e - p_e), k = 1..T (``oracle_rates`` has at least T entries)."""
  p = per_episode_success(s)
  ref = np.asarray(oracle_rates, dtype=np.float64)
  if len(ref) < len(p):
    raise ValueError(f"oracle_rates has {len(ref)} entries, need {len(p)}")
  return np.cumsum(ref[:len(p)] - p)


def new_states_after_failure(states: Sequence[Sequence[Iterable[Hashable]]], s: np.ndarray
                             ) -> dict[int, tuple[float, int]]:
  """``{k: (mean new states in episode k | episodes 1..k-1 all failed, number of such trajectories)}``.

  ``states[n][e]`` are the states visited in episode e + 1 of trajectory n; a trajectory with fewer state
  lists than k is skipped for that k. The mean is NaN when no trajectory qualifies."""
  if len(states) != len(s):
    raise ValueError(f"got states for {len(states)} trajectories and successes for {len(s)}")
  out = {}
  for k in range(2, s.shape[1] + 1):
    counts = []
    for n, episodes in enumerate(states):
      if len(episodes) < k or s[n, :k - 1].any():
        continue
      seen = set().union(*(set(e) for e in episodes[:k - 1]))
      counts.append(len(set(episodes[k - 1]) - seen))
    out[k] = (float(np.mean(counts)) if counts else float("nan"), len(counts))
  return out


def unique_states(states: Sequence[Sequence[Iterable[Hashable]]]) -> float:
  """Mean number of distinct states over each whole trajectory."""
  sizes = [len(set().union(*(set(e) for e in episodes))) if episodes else 0 for episodes in states]
  return float(np.mean(sizes)) if sizes else float("nan")


def summarize(s: np.ndarray, states: Sequence[Sequence[Iterable[Hashable]]] | None = None,
              oracle_rates: Sequence[float] | None = None, j_star: float = 1.0) -> dict[str, float]:
  """All of the above as flat metric names (ORBIT's names where it has them)."""
  out: dict[str, float] = {}
  for k, (p, reg) in enumerate(zip(per_episode_success(s), in_context_regret(s, j_star)), start=1):
    out[f"episode_{k}/success_rate"] = float(p)
    out[f"regret/ep{k}"] = float(reg)
  out["episode/success_count"] = success_count(s)
  out["episode/success_rate"] = any_success_rate(s)
  if oracle_rates is not None:
    for k, reg in enumerate(oracle_regret(s, oracle_rates), start=1):
      out[f"oracle_regret/ep{k}"] = float(reg)
  if states is not None:
    for k, (mean, count) in new_states_after_failure(states, s).items():
      out[f"explore/new_states_ep{k}_given_fail"] = mean
      out[f"explore/num_ep{k}_given_fail"] = float(count)
    out["explore/unique_states"] = unique_states(states)
  return out
