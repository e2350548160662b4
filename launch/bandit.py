"""Reproduces Appendix E of the CoD paper (Figures 9-11) with codjax.rl.bandit.

Figure 9: the regularized expected REINFORCE flow (lam = 1e-4) from theta = 0 for every training mixture
rho in {0, 0.1, ..., 1}; prints J_{lam,rho'}(theta_rho) for every evaluation mixture rho' (the balanced
policy reads 0.5693 in every column) and plots each policy's affine line over rho'. Figures 10 and 11: one
finite-sample REINFORCE run (Eq. 18; eta = 0.02, B = 128, 800,000 updates) per rho in --sample_rhos, against
the expected flow over the same horizon t = eta * updates, without (Fig. 10) and with (Fig. 11) weight decay.

  python launch/bandit.py --out_dir=runs/bandit
"""

from __future__ import annotations

import os

from absl import flags
import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the backend)
import numpy as np  # noqa: E402

from codjax.common import cli  # noqa: E402
from codjax.rl import bandit  # noqa: E402

_OUT_DIR = flags.DEFINE_string("out_dir", "runs/bandit", "Where the PNG figures go.")
_LAM = flags.DEFINE_float("lam", 1e-4, "L2 coefficient lambda (Eq. 11) for Figures 9 and 11.")
_FLOW_DT = flags.DEFINE_float("flow_dt", 5.0, "RK4 step of the Figure 9 flow.")
_FLOW_STEPS = flags.DEFINE_integer("flow_steps", 200_000, "RK4 steps of the Figure 9 flow (t = dt * steps).")
_ETA = flags.DEFINE_float("eta", 0.02, "Learning rate of the finite-sample updates (Eq. 18).")
_BATCH = flags.DEFINE_integer("batch_size", 128, "Contexts per finite-sample update.")
_UPDATES = flags.DEFINE_integer("num_updates", 800_000, "Finite-sample updates (Figures 10, 11).")
_RECORDS = flags.DEFINE_integer("num_records", 400, "Recorded points per trajectory in Figures 10, 11.")
_SAMPLE_RHOS = flags.DEFINE_list("sample_rhos", ["0.5", "0.8"], "Training mixtures of Figures 10 and 11.")
_SEED = flags.DEFINE_integer("seed", 0, "PRNG seed of the finite-sample runs.")

_RHOS = np.round(np.linspace(0.0, 1.0, 11), 1)
_PARAM_NAMES = ("w1", "w2", "b1", "b2")


def figure9(thetas: np.ndarray, table: np.ndarray, lam: float, path: str) -> None:
  fig, ax = plt.subplots(figsize=(13, 6))
  colors = plt.cm.coolwarm(np.linspace(0.0, 1.0, len(_RHOS)))
  line_rhos = np.array([0.0, 1.0])
  line = np.asarray(bandit.evaluation_table(jnp.asarray(thetas), jnp.asarray(line_rhos), lam))
  for i, (rho, theta) in enumerate(zip(_RHOS, thetas)):
    label = f"rho={rho:.1f}: w=({theta[0]:.2f}, {theta[1]:.2f}), b=({theta[2]:.2f}, {theta[3]:.2f})"
    ax.plot(line_rhos, line[i], color=colors[i], lw=1.2, label=label)
    ax.plot(_RHOS, table[i], "o", color=colors[i], ms=4)
  ax.set_xlabel("evaluation mixture rho'")
  ax.set_ylabel(f"J_(lambda={lam:g}, rho')(theta_rho)")
  ax.set_title("Figure 9: converged policies under every evaluation mixture")
  ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def figure_dynamics(steps: np.ndarray, sampled: np.ndarray, expected: np.ndarray, rhos: list[float],
                    title: str, path: str) -> None:
  """sampled / expected: [len(rhos), R + 1, 4] parameter paths at the update counts ``steps``."""
  fig, axes = plt.subplots(len(rhos), 2, figsize=(11, 3.5 * len(rhos)), squeeze=False)
  colors = ("tab:blue", "tab:orange", "tab:green", "tab:red")
  for row, rho in enumerate(rhos):
    for col, idx in enumerate(((0, 1), (2, 3))):
      ax = axes[row, col]
      for p in idx:
        ax.plot(steps, sampled[row, :, p], color=colors[p], lw=1.0, label=f"{_PARAM_NAMES[p]} sampled")
        ax.plot(steps, expected[row, :, p], "k--", lw=1.0)
      ax.set_title(f"rho={rho:g}: {'weights' if col == 0 else 'biases'} (black dashed: expected flow)")
      ax.set_xlabel("update")
      ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
      ax.legend(fontsize=8)
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def print_figure9_table(thetas: np.ndarray, table: np.ndarray, lam: float) -> None:
  print(f"Figure 9 (lambda={lam:g}): J_(lambda, rho')(theta_rho); rows: training rho, columns: rho'")
  print("rho  | " + " ".join(f"{r:6.1f}" for r in _RHOS) + " | w1      w2      b1      b2      m1      m2")
  margins = np.stack(bandit.margins(jnp.asarray(thetas)), axis=-1)
  for rho, row, theta, m in zip(_RHOS, table, thetas, margins):
    params = " ".join(f"{v:7.3f}" for v in (*theta, *m))
    print(f"{rho:4.1f} | " + " ".join(f"{v:6.4f}" for v in row) + " | " + params)
  balanced = table[5]
  for i in (4, 6):
    excess = table[i, i] - balanced[i]
    print(f"in-distribution excess over the balanced policy at rho={_RHOS[i]:.1f}: {excess:.2e}")


def dynamics(rhos: list[float], lam: float, key: jax.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  if _UPDATES.value % _RECORDS.value:
    raise ValueError("--num_updates must be a multiple of --num_records")
  per_record = _UPDATES.value // _RECORDS.value
  rho_arr = jnp.asarray(rhos)
  keys = jax.random.split(key, len(rhos))
  sampled = jax.vmap(lambda k, r: bandit.sampled_reinforce(
      k, r, lam, _ETA.value, _BATCH.value, per_record, _RECORDS.value))(keys, rho_arr)
  # Expected flow on the same horizon t = eta * updates, 10 RK4 substeps per record.
  expected = jax.vmap(lambda r: bandit.gradient_flow(
      r, lam, _ETA.value * per_record / 10, 10, _RECORDS.value))(rho_arr)
  steps = np.arange(_RECORDS.value + 1) * per_record
  return steps, np.asarray(sampled), np.asarray(expected)


def main(argv):
  del argv
  os.makedirs(_OUT_DIR.value, exist_ok=True)
  lam = _LAM.value
  thetas = np.asarray(bandit.converged_policies(jnp.asarray(_RHOS), lam, _FLOW_DT.value, _FLOW_STEPS.value))
  velocity = bandit.flow_velocity(jnp.asarray(thetas), jnp.asarray(_RHOS), lam)
  table = np.asarray(bandit.evaluation_table(jnp.asarray(thetas), jnp.asarray(_RHOS), lam))
  print_figure9_table(thetas, table, lam)
  print(f"flow time {_FLOW_DT.value * _FLOW_STEPS.value:g}, max |d theta/dt| at the end: "
        f"{float(jnp.max(jnp.abs(velocity))):.1e}")
  figure9(thetas, table, lam, os.path.join(_OUT_DIR.value, "figure9.png"))

  rhos = [float(r) for r in _SAMPLE_RHOS.value]
  key = jax.random.key(_SEED.value)
  for fig_name, fig_lam, key_i in (("figure10", 0.0, 0), ("figure11", lam, 1)):
    steps, sampled, expected = dynamics(rhos, fig_lam, jax.random.fold_in(key, key_i))
    title = (f"{fig_name}: REINFORCE, eta={_ETA.value:g}, B={_BATCH.value}, lambda={fig_lam:g}, "
             f"{_UPDATES.value} updates")
    figure_dynamics(steps, sampled, expected, rhos, title, os.path.join(_OUT_DIR.value, f"{fig_name}.png"))
    for rho, s, e in zip(rhos, sampled[:, -1], expected[:, -1]):
      print(f"{fig_name} rho={rho:g} lambda={fig_lam:g} final theta sampled "
            + " ".join(f"{v:7.3f}" for v in s) + " | expected " + " ".join(f"{v:7.3f}" for v in e))
  print(f"figures written to {_OUT_DIR.value}")


if __name__ == "__main__":
  cli.run(main)
