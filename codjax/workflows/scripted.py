"""Scripted policies as a workflow configures them: the teacher of SFT transcripts, of the tiny tokenizer's corpus
and of ``launch/evaluate.py --engine=expert``, and the random baseline (the harness workflow uses its own)."""

from __future__ import annotations

from codjax.envs.experts import make_teacher


def configured_teacher(cfg, env_name: str, random_frac: float = 0.0):
  """``env_name``'s expert built with ``sft.teacher_params[env_name]`` (if any), with ``random_frac`` of its
  solve turns random: the one place SFT transcripts, the tiny tokenizer's corpus and ``evaluate.py
  --engine=expert`` get their teacher from."""
  params = dict(cfg.sft.teacher_params.get(env_name, {}))
  if str(cfg.workflow) == "evoharness":  # the harness workflow's replies: the teacher that uses the harness
    from codjax.agents.harness.teacher import make_harness_teacher

    return make_harness_teacher(random_frac, **params)
  return make_teacher(env_name, random_frac, **params)


def scripted_policy(cfg, env_name: str, kind: str, random_frac: float = 0.0):
  """A scripted policy for evaluation: ``kind="random"`` is the environment's random player, anything else the
  ``configured_teacher`` with ``random_frac`` of its solve turns random (launch/evaluate.py's
  ``--engine=expert|random``, the trainer's ``eval.baselines``)."""
  from codjax.envs.experts import make_policy

  if kind == "random" and str(cfg.workflow) == "evoharness":  # the harness workflow's per-turn prompt
    from codjax.agents.harness.teacher import HarnessRandom

    return HarnessRandom()
  return make_policy(env_name, "random") if kind == "random" else configured_teacher(cfg, env_name, random_frac)
