"""From rolled-out trajectories to per-episode advantages (the glue between agents/ and rl/).

CoD (paper Sec. 3.1, App. A): per pack, task rewards [G, S] and hint rewards [G, S-1] give per-episode
scores through ``codjax.rl.advantages.cod_advantages`` (mean rewards-to-go, per-position group baseline);
then adaptive RED-Weight over the whole step's episodes with their loss-token counts. GRPO (ORBIT, EvoHarness):
the trajectory return (sum of its solve rewards, or the success count) normalized within the pack's group,
shared by every episode of the trajectory.
"""

from __future__ import annotations

import numpy as np

from codjax.agents.cod import CodTrajectory
from codjax.agents.episode import Episode
from codjax.rl.advantages import apply_red_weight, cod_advantages, grpo_advantages, red_weight_temperature


def group_by_pack(trajs: list[CodTrajectory]) -> list[list[CodTrajectory]]:
  groups: dict[int, list[CodTrajectory]] = {}
  for t in trajs:
    groups.setdefault(t.pack.pack_id, []).append(t)
  return [sorted(g, key=lambda t: t.repeat_id) for _, g in sorted(groups.items())]


def cod_episode_scores(trajs: list[CodTrajectory], returns: str = "mean", window: int | None = None,
                       gamma: float | None = None) -> list[tuple[Episode, float]]:
  out = []
  for group in group_by_pack(trajs):
    task = np.stack([t.task_rewards for t in group])  # [G, S]
    s = task.shape[1]
    hint = np.stack([t.hint_rewards if len(t.update_episodes) else np.zeros(0) for t in group])
    if hint.shape[1] != s - 1:  # no update episodes (use_hints=False): only solve credit
      hint = np.zeros((len(group), s - 1))
    solve_adv, hint_adv = cod_advantages(task, hint, returns=returns, window=window, gamma=gamma)
    for g, t in enumerate(group):
      out += [(ep, float(solve_adv[g, i])) for i, ep in enumerate(t.solve_episodes)]
      out += [(ep, float(hint_adv[g, i])) for i, ep in enumerate(t.update_episodes)]
  return out


def grpo_episode_scores(trajs: list[CodTrajectory], normalize_std: bool = True) -> list[tuple[Episode, float]]:
  rewards = np.array([t.task_rewards.sum() for t in trajs])
  groups = np.array([t.pack.pack_id for t in trajs])
  adv = np.asarray(grpo_advantages(rewards, groups, normalize_std=normalize_std))
  return [(ep, float(a)) for t, a in zip(trajs, adv) for ep in t.episodes()]


def apply_red(scored: list[tuple[Episode, float]], t_min: float, t_max: float, max_iter: int, tol: float
              ) -> tuple[list[tuple[Episode, float]], float | None]:
  """Adaptive RED-Weight over the batch (token-weighted by each episode's loss tokens)."""
  if not scored:
    return scored, None
  scores = np.array([s for _, s in scored])
  counts = np.array([ep.num_loss_tokens for ep, _ in scored], np.float64)
  temp = red_weight_temperature(scores, counts, t_min=t_min, t_max=t_max, max_iter=max_iter, tol=tol)
  new = np.asarray(apply_red_weight(scores, temp))
  return [(ep, float(s)) for (ep, _), s in zip(scored, new)], temp
