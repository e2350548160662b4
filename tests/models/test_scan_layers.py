"""``scan_layers=False`` (a Python loop over the layers) computes the same model as the scanned layers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from codjax.models import init_model, preset

pytestmark = pytest.mark.slow  # gradients of whole models, both layer loops (~35 s)


def _loss_and_grads(model, ids, pos=None, seg=None):
  gdef, params = nnx.split(model)

  def loss(p):
    logits = nnx.merge(gdef, p)(ids, pos, seg)
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - logits[..., 0])

  return jax.jit(jax.value_and_grad(loss))(params)


@pytest.mark.parametrize("impl,remat", [("xla", "none"), ("blockwise", "full")])
def test_unrolled_layers_match_scan(impl, remat):
  cfg = preset("tiny", num_hidden_layers=3, attention_impl=impl, remat=remat)
  scanned, looped = init_model(cfg, seed=2), init_model(cfg.replace(scan_layers=False), seed=2)
  ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 96)))
  seg = jnp.asarray(np.repeat([[1] * 50 + [2] * 40 + [0] * 6], 2, axis=0))
  pos = jnp.asarray(np.repeat([list(range(50)) + list(range(40)) + [0] * 6], 2, axis=0))
  np.testing.assert_allclose(looped(ids), scanned(ids), atol=1e-5)
  np.testing.assert_allclose(looped(ids, pos, seg), scanned(ids, pos, seg), atol=1e-5)
  (l_s, g_s), (l_l, g_l) = _loss_and_grads(scanned, ids), _loss_and_grads(looped, ids)
  np.testing.assert_allclose(l_l, l_s, rtol=1e-6)
  leaves_s, leaves_l = jax.tree.leaves(g_s), jax.tree.leaves(g_l)
  assert [x.shape for x in leaves_l] == [x.shape for x in leaves_s]  # gradients keep the stacked layout
  for a, b in zip(leaves_l, leaves_s):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-4)


def test_scan_layers_must_be_bool():
  with pytest.raises(ValueError, match="scan_layers"):
    preset("tiny", scan_layers="no")
