"""Environment throughput: env steps per second under the scripted expert's actions.

For each environment preset, solves packs with the expert and times ``sample_pack`` + ``reset`` + ``step``
(the environment's own cost) separately from the expert's ``respond`` (the scripted policy's cost). Prints
one row per environment: steps, env-only steps/s, and end-to-end steps/s including the expert.

  python benchmarks/env_speed.py --packs=200
"""

from __future__ import annotations

import random
import time

from absl import app
from absl import flags

from codjax.envs import derive_seed, make
from codjax.envs.experts import make_policy

_PACKS = flags.DEFINE_integer("packs", 200, "Packs per environment (4 tasks each).")
_ENVS = flags.DEFINE_list("envs", ["frozenlake_obscure:train", "frozenlake_obscure:hard", "frozenlake_obscure:tiny",
                                   "alchemy_random:easy", "alchemy_random:hard", "terminal_simulator:eval"],
                          "env:preset entries.")


def measure(env: str, preset: str, packs: int, pack_size: int = 4) -> dict:
  family = make(env, preset=preset)
  expert = make_policy(env, "expert")
  env_s = policy_s = 0.0
  steps = 0
  for k in range(packs):
    t = time.perf_counter()
    tasks = family.sample_pack(derive_seed(7, k), pack_size)
    env_s += time.perf_counter() - t
    for j, task in enumerate(tasks):
      t = time.perf_counter()
      system, obs = task.reset()
      env_s += time.perf_counter() - t
      messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
      rng = random.Random(f"{k}/{j}")
      while True:
        t = time.perf_counter()
        action = expert.respond(messages, rng)
        policy_s += time.perf_counter() - t
        t = time.perf_counter()
        res = task.step(action)
        env_s += time.perf_counter() - t
        steps += 1
        if res.done:
          break
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": res.observation}]
  return {"env": env, "preset": preset, "steps": steps, "env_steps_per_s": steps / env_s,
          "total_steps_per_s": steps / (env_s + policy_s)}


def main(argv):
  del argv
  print(f"{'environment':<34} {'steps':>7} {'env steps/s':>12} {'with expert':>12}")
  for entry in _ENVS.value:
    env, _, preset = entry.partition(":")
    r = measure(env, preset, _PACKS.value)
    print(f"{env + ':' + preset:<34} {r['steps']:>7} {r['env_steps_per_s']:>12,.0f} {r['total_steps_per_s']:>12,.0f}")


if __name__ == "__main__":
  app.run(main)
