"""Helpers for the ORBIT game tests: one multi-episode conversation over a pack's episodes."""

import random

import pytest


def play(envs, policy, seed=0):
  """Plays ``envs`` as consecutive episodes of one conversation (ORBIT layout); returns (successes, messages)."""
  rng = random.Random(seed)
  messages, carry, successes = [], "", []
  for k, env in enumerate(envs, start=1):
    system, obs = env.reset()
    if k == 1:
      messages.append({"role": "system", "content": system})
    head = f"[Episode {k}] New episode begins.\n{obs}"
    messages.append({"role": "user", "content": f"{carry}\n\n{head}" if carry else head})
    while True:
      action = policy.respond(messages, rng)
      messages.append({"role": "assistant", "content": action})
      result = env.step(action)
      if result.done:
        carry = result.observation
        successes.append(result.info["success"])
        break
      messages.append({"role": "user", "content": result.observation})
  return successes, messages


def run(env, actions):
  """Resets ``env`` and plays ``actions`` until done; returns the list of StepResults."""
  env.reset()
  out = []
  for a in actions:
    out.append(env.step(a))
    if out[-1].done:
      break
  return out


@pytest.fixture
def play_episodes():
  return play


@pytest.fixture
def run_actions():
  return run
