"""RL core: CoD credit assignment, RED-Weight, GRPO advantages and the registered policy losses."""

from codjax.rl.advantages import apply_red_weight
from codjax.rl.advantages import cod_advantages
from codjax.rl.advantages import cod_returns
from codjax.rl.advantages import grpo_advantages
from codjax.rl.advantages import orbit_success_count
from codjax.rl.advantages import red_weight_temperature
from codjax.rl.losses import aggregation_weights
from codjax.rl.losses import available_losses
from codjax.rl.losses import get_loss
from codjax.rl.losses import kl_estimate
from codjax.rl.losses import LossConfig
from codjax.rl.losses import register_loss

__all__ = [
    "LossConfig",
    "aggregation_weights",
    "apply_red_weight",
    "available_losses",
    "cod_advantages",
    "cod_returns",
    "get_loss",
    "grpo_advantages",
    "kl_estimate",
    "orbit_success_count",
    "red_weight_temperature",
    "register_loss",
]
