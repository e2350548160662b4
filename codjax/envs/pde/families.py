"""Ground-truth template families of PDE-Discovery, stored as package data (``families/*.json``).

codjax ships its own template lists, of the same shape as the published ones (agentscope-ai/Trinity-RFT
``trinity/common/workflows/connect_the_dots/pde_discovery/ground_truth_families/physical_full_train.json`` and
``physical_full_eval_4000.json``) but written independently, chosen by these rules (a departure listed in
docs/methods/cod.md):

* ``train``: 40 templates, 5 one-term and 35 two-term, every support distinct;
* ``eval``: 25 templates, 17 two-term and 8 three-term; no eval support equals any train support
  ("support-disjoint"), so evaluation asks for reaction terms combined in ways never seen in training;
* every template has fixed signs following reaction-diffusion practice: a low-order or saturating source
  term paired with a higher-order loss term (Fisher-KPP, Allen-Cahn, Zeldovich, spruce budworm,
  Arrhenius-type sources, Hill switches, ...), or a decay term paired with a bounded activation. Growth
  terms that would blow up for coefficients up to 2 (e.g. ``+u**5``) are avoided, which keeps the
  family-calibrated initial amplitude bound (``model.amplitude_upper_bound``) large, so trajectories reach
  u-values where the dictionary terms are distinguishable. Each template's ``motivation`` names its origin.

The tests check the counts, distinct supports, disjointness and sign vectors.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources

from codjax.envs.pde import dictionary

FAMILIES = ("train", "eval")


@dataclasses.dataclass(frozen=True)
class Template:
  terms: tuple[int, ...]  # dictionary indices
  signs: tuple[int, ...]  # +1 / -1 per term (0 would mean "random sign"; unused by the shipped families)
  motivation: str = ""


@functools.lru_cache(maxsize=None)
def load_family(name: str) -> tuple[Template, ...]:
  if name not in FAMILIES:
    raise ValueError(f"unknown PDE template family {name!r}; choose from {FAMILIES}")
  raw = json.loads(resources.files("codjax.envs.pde").joinpath(f"families/{name}.json").read_text())
  out = []
  for i, t in enumerate(raw["templates"]):
    terms, signs = t["terms"], t.get("signs") or [0] * len(t["terms"])
    if len(terms) != len(signs) or any(s not in (-1, 0, 1) for s in signs):
      raise ValueError(f"family {name!r} template {i}: bad signs {signs!r}")
    unknown = [x for x in terms if x not in dictionary.TERM_INDEX]
    if unknown:
      raise ValueError(f"family {name!r} template {i}: terms {unknown} are not in the dictionary")
    out.append(Template(tuple(dictionary.TERM_INDEX[x] for x in terms), tuple(signs), t.get("motivation", "")))
  return tuple(out)
