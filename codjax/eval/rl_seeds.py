"""The RL-robustness table: one row per RL seed run from the same SFT model (``launch/rl_seeds.py``).

Each row reads what the trainer wrote into that seed's run directory: ``eval/rl_effect.json`` (the paired
difference final - start over the same test packs and sampling seeds, its standard error and its per-position
means), ``eval/start.json`` and ``eval/final.json`` (mean solve reward, hint accuracy and parse rate), and
``rl_seed.json`` (the launcher's wall time and peak RSS of the child process, when the launcher ran it). The
table is the README's robustness table ("What the main job shows"); ``z = mean / se`` is the effect in
standard errors; the demo counts as robust when z >= 3 for every seed.
"""

from __future__ import annotations

import dataclasses
import json
import os

from codjax.eval.plots import RL_EFFECT_FILE, load_eval, load_rl_effect

RUN_RECORD = "rl_seed.json"  # the launcher's record of a seed's child process (wall time, peak RSS, command)


@dataclasses.dataclass(frozen=True)
class SeedRow:
  seed: int
  run_dir: str
  label: str  # the evaluation label (the config's eval env name, e.g. "frozenlake")
  n: int  # test packs
  before: float  # mean solve reward at the start evaluation
  after: float  # ... and at the final one
  mean: float  # paired RL effect (final - start), mean over packs
  se: float  # its standard error over packs
  per_position: tuple[float, ...]
  hint_acc: tuple[float | None, float | None]  # start, final
  hint_parse: tuple[float | None, float | None]
  wall_s: float | None
  peak_rss_gib: float | None

  @property
  def z(self) -> float:
    return self.mean / self.se if self.se > 0 else float("nan")


def _require(path: str) -> str:
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path} is missing: the run did not finish its evaluations (an RL-effect row needs "
                            "eval/start.json, eval/final.json and eval/rl_effect.json, i.e. eval.at_start and "
                            "eval.at_end)")
  return path


def read_row(run_dir: str, seed: int, label: str | None = None) -> SeedRow:
  """The row of one finished RL run (``label``: which evaluation label; default the only one there is)."""
  ev = os.path.join(run_dir, "eval")
  effect = load_rl_effect(_require(os.path.join(ev, RL_EFFECT_FILE)))
  if label is None:
    if len(effect) != 1:
      raise ValueError(f"{ev}/{RL_EFFECT_FILE} holds labels {sorted(effect)}: name one")
    label = next(iter(effect))
  if label not in effect:
    raise ValueError(f"{ev}/{RL_EFFECT_FILE} has no label {label!r} (it has {sorted(effect)})")
  e = effect[label]
  start = load_eval(_require(os.path.join(ev, "start.json"))).results[label]
  final = load_eval(_require(os.path.join(ev, "final.json"))).results[label]
  rec_path = os.path.join(run_dir, RUN_RECORD)
  rec = {}
  if os.path.isfile(rec_path):
    with open(rec_path) as f:
      rec = json.load(f)
  return SeedRow(seed=int(seed), run_dir=run_dir, label=label, n=int(e["n"]), before=float(start["mean_reward"]),
                 after=float(final["mean_reward"]), mean=float(e["mean"]), se=float(e["se"]),
                 per_position=tuple(float(m) for m, _ in e["per_position"]),
                 hint_acc=(start.get("hint_accuracy"), final.get("hint_accuracy")),
                 hint_parse=(start.get("hint_parse_rate"), final.get("hint_parse_rate")),
                 wall_s=rec.get("wall_s"), peak_rss_gib=rec.get("peak_rss_gib"))


def _pair(a: float | None, b: float | None, digits: int) -> str:
  if a is None or b is None:
    return "n/a"
  return f"{a:.{digits}f} -> {b:.{digits}f}"


def _wall(row: SeedRow) -> str:
  if row.wall_s is None:
    return "n/a"
  m, s = divmod(int(round(row.wall_s)), 60)
  rss = f", {row.peak_rss_gib:.1f} GiB" if row.peak_rss_gib is not None else ""
  return f"{m} min {s:02d} s{rss}"


def format_table(rows: list[SeedRow], bar: float = 3.0) -> str:
  """A markdown table (the README's columns) and a last line counting the seeds at or above ``bar`` s.e."""
  head = ("| RL seed | start -> after RL (mean solve reward) | paired RL effect | per position | hint acc (parse) "
          "| wall, peak RSS |\n|---|---|---|---|---|---|")
  lines = [head]
  for r in rows:
    effect = f"{r.mean:+.3f} ± {r.se:.3f} ({r.z:+.1f} s.e.)"
    if r.z >= bar:
      effect = f"**{effect}**"
    hint = f"{_pair(*r.hint_acc, 2)} ({_pair(*r.hint_parse, 3)})"
    lines.append(f"| {r.seed} | {r.before:.3f} -> {r.after:.3f} | {effect} | "
                 f"{' / '.join(f'{m:+.3f}' for m in r.per_position)} | {hint} | {_wall(r)} |")
  over = sum(r.z >= bar for r in rows)
  lines.append(f"\n{over} of {len(rows)} RL seeds at or above {bar:g} standard errors"
               + (f" (lowest {min(r.z for r in rows):+.1f})" if rows else ""))
  return "\n".join(lines)


def summary(rows: list[SeedRow]) -> dict:
  """JSON-ready: every row's fields plus z."""
  return {"rows": [dict(dataclasses.asdict(r), z=r.z) for r in rows],
          "min_z": min((r.z for r in rows), default=None)}
