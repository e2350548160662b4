"""launch/plan_memory.py and codjax/train/memory_plan.py: hand-calculated bytes, Qwen3-8B figures, XLA agreement."""

import functools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from codjax.models import abstract_model, preset
from codjax.rl.train_step import REQUIRED_FIELDS, OptimizerConfig, StepConfig, TrainState, make_optimizer, train_step
from codjax.train.config import base_config, load_experiment, validate
from codjax.train.memory_plan import activation_bytes, format_plan, mesh_sizes, plan, resolve_architecture

pytestmark = pytest.mark.slow  # compiles train steps to compare with XLA's buffers (~40 s)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SETTING_A = os.path.join(ROOT, "experiments", "cod_frozenlake_qwen3_8b.py")


def tiny_config():
  c = base_config()
  c.model.preset = "tiny"  # vocab 512, D 128, F 384, L 2, N 4, K 2, H 32, tied embeddings
  c.model.update(dtype="float32", remat="full", attention_impl="xla", vocab_chunks=4)
  c.mesh.update(data=1, fsdp=2, tensor=2)
  c.data.update(pack_size=4, packs_per_step=2, repeats=2)  # 2 x 2 x (4 + 3) = 28 episodes
  c.train.update(seq_len=64, num_microbatches=2)
  c.rollout.update(engine="jax", max_prompt_tokens=48, max_response_tokens=16, max_slots=7)
  return validate(c)


def load_setting_a():
  return load_experiment(SETTING_A).get_config()


def test_tiny_plan_equals_hand_calculation():
  p = plan(tiny_config())
  assert p.mesh == {"data": 1, "fsdp": 2, "tensor": 2, "expert": 1} and p.devices == 4
  # float32 elements per device: embed [512/2 tensor, 128/2 fsdp]; norms replicated; q [2, 128/2, 4/2, 32];
  # k, v [2, 64, 2/2, 32]; o [2, 4/2, 32, 64]; gate, up [2, 64, 384/2]; down [2, 192, 64].
  elems = (256 * 64 + 128 + 2 * 128 + 2 * 64 * 2 * 32 + 2 * (2 * 64 * 1 * 32) + 2 * 2 * 32 * 64 + 2 * 32 + 2 * 32
           + 2 * 128 + 3 * (2 * 64 * 192))
  assert p.params == 4 * elems == 461_824
  assert p.grads == 2 * p.params  # two microbatches: accumulator + current gradients
  assert p.optimizer == 2 * p.params + 2 * 4  # AdamW mu, nu (float32) + two int32 step counters
  # rows: 28 episodes padded to a bucket of multiples of k * (data * fsdp) = 4 -> 32 rows, 8 per device per mb
  assert (p.episodes, p.rows, p.rows_per_device) == (28, 32, 8)
  n = 8 * 64  # tokens per device per microbatch
  e = 4 * (4 * 128 + 3 * 2 * 32 + 3 * 1 * 32 + 3 * 192) + 2 * 64 * (4 + 4)  # per-token layer residuals (xla)
  assert e == 6528
  assert p.activations == {
      "saved layer activations (remat full)": 2 * n * 4 * 128,
      "working layer (backward)": 2 * n * e,
      "attention mask": 8 * 64 * 64 + 64 * 64,
      "hidden states and rope": 2 * n * 128 * 4 + 2 * n * 16 * 4,
      "logprob chunk (V/4)": 4 * n * (512 // 4 // 2) * 4 + 4 * 4 * n * 4,
      "batch arrays": 7 * 16 * 64 * 4,
  }
  # KV cache [L=2, slots 8 (7 + scratch, a multiple of 2 shards) / 2, S = 48 + 16 + 1, K 2 / 2, H 32] x (k, v)
  assert p.engine == {"jax engine KV cache (8 slots x 65)": 2 * (2 * 4 * 65 * 1 * 32) * 4,
                      "jax engine parameter copy": p.params}
  assert p.total == p.params + p.grads + p.optimizer + sum(p.activations.values()) + sum(p.engine.values())


def test_remat_and_attention_terms():
  arch = preset("tiny", remat="none", attention_impl="cudnn")
  a = activation_bytes(arch, rows=2, seq_len=128, tp=1, vocab_chunks=1)
  e = 4 * (4 * 128 + 3 * 4 * 32 + 3 * 2 * 32 + 3 * 384) + 4 * 4  # cudnn keeps a float32 logsumexp per head
  assert a["saved layer activations (remat none)"] == 2 * 256 * e and a["working layer (backward)"] == 256 * e
  dots = activation_bytes(arch.replace(remat="dots"), rows=2, seq_len=128, tp=1, vocab_chunks=1)
  assert dots["saved layer activations (remat dots)"] == 2 * 256 * 4 * (3 * 128 + 4 * 32 + 2 * 2 * 32 + 2 * 384)
  assert dots["working layer (backward)"] == 2 * 256 * e


def test_qwen3_8b_figures():
  cfg = load_setting_a()
  arch, source = resolve_architecture(cfg)
  assert source.startswith("model.arch=qwen3-8b") and arch.num_params() == 8_190_735_360
  cfg_bf16 = load_setting_a()
  cfg_bf16.model.param_dtype = "bfloat16"
  p16 = plan(cfg_bf16)
  total16 = 2 * arch.num_params()
  assert 16.3e9 < total16 < 16.5e9  # Qwen3-8B in bf16: ~16.4 GB
  assert abs(p16.params * 8 - total16) / total16 < 1e-3  # fsdp 8 shards everything but the norms
  p = plan(cfg)  # the config as shipped: float32 parameters, bf16 compute, 3x8 mesh, vLLM at 0.3 of 80 GiB
  gib = 1024**3
  assert p.devices == 24 and p.rows_per_device == 1
  assert abs(p.params - 2 * p16.params) <= 8
  assert 3.7 < p.params / gib < 3.9 and 7.5 < p.optimizer / gib < 7.8
  assert 5 < sum(p.activations.values()) / gib < 20  # bf16 activations
  assert p.total < 80 * gib and "fits" in format_plan(p, 80)
  assert "DOES NOT FIT" in format_plan(p, 40)


def test_errors():
  cfg = tiny_config()
  with pytest.raises(ValueError, match="needs 4 devices"):
    plan(cfg, devices=8)
  cfg.mesh.fsdp = -1
  assert mesh_sizes(cfg.mesh, devices=16) == {"data": 1, "fsdp": 8, "tensor": 2, "expert": 1}
  with pytest.raises(ValueError, match="cannot be split"):
    mesh_sizes(cfg.mesh, devices=3)
  c = load_setting_a()
  c.model.arch = ""
  with pytest.raises(ValueError, match="--model_preset"):
    plan(c)
  assert plan(c, model_preset="qwen3-0.6b").arch.hidden_size == 1024


@pytest.mark.parametrize("remat,impl", [("full", "xla"), ("none", "xla"), ("none", "blockwise")])
def test_estimate_tracks_xla_buffer_assignment(remat, impl):
  """The plan's activations + gradients against XLA's compiled temporary bytes of the real train step (CPU,
  one device; the rows are long enough that the backward pass, not the optimizer update, is the peak).
  Measured ratios (estimate / XLA) on tiny to 4-layer, D=256 models: full 1.17-1.23, dots 0.86-0.99,
  none 0.82-0.87. The hybrid was measured the same way (tiny-hybrid with 8-12 layers, D 128-256, so the block
  scan iterates: none 0.80-0.91, full 1.06-1.08, dots 1.20-1.22); its compile takes ~1 min on 2 cores, so
  it is not repeated here."""
  arch = preset("tiny", remat=remat, attention_impl=impl)
  rows, t = 2, 512
  graphdef, params = nnx.split(abstract_model(arch), nnx.Param)
  opt = make_optimizer(OptimizerConfig())
  state = TrainState(params=params, opt_state=jax.eval_shape(opt.init, params),
                     step=jax.ShapeDtypeStruct((), jnp.int32))
  batch = {k: jax.ShapeDtypeStruct((rows, t), jnp.int32 if k in ("tokens", "positions", "segment_ids")
                                   else jnp.float32) for k in REQUIRED_FIELDS}
  fn = jax.jit(functools.partial(train_step, graphdef, opt, StepConfig(vocab_chunks=4)), donate_argnums=(0,))
  xla = fn.lower(state, batch).compile().memory_analysis().temp_size_in_bytes
  est = sum(activation_bytes(arch, rows, t, tp=1, vocab_chunks=4).values()) + 4 * arch.num_params()
  assert 0.75 < est / xla < 1.3, (est, xla)


def test_cli_prints_the_table():
  out = subprocess.run([sys.executable, os.path.join(ROOT, "launch", "plan_memory.py"), f"--config={SETTING_A}",
                        "--config.model.param_dtype=bfloat16", "--device_memory_gib=80"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert out.returncode == 0, out.stderr
  text = out.stdout
  assert "mesh          data=3 fsdp=8 tensor=1 (24 devices)" in text
  assert "448 episodes/step -> 456 rows x 12000 tokens" in text
  assert "  parameters" in text and "1.91" in text  # 16.4 GB / 8 fsdp shards, in GiB
  assert "device memory 80 GiB: fits" in text


def test_evaluation_config_has_no_train_step():
  p = plan(load_experiment(os.path.join(ROOT, "experiments", "eval_terminal.py")).get_config())
  assert p.grads == 0 and p.activations == {} and p.rows == 0
  assert p.optimizer == 2 * p.params + 2 * 4  # bf16 mu, nu (the Trainer allocates them) + step counters
  assert p.total == p.params + p.optimizer + int(0.5 * 80 * 1024**3)
  assert "batch         none (evaluation only)" in format_plan(p, 80)


def test_kl_reference_is_counted():
  """kl_coef > 0: the frozen reference policy's parameters (a copy of the starting model's, sharded alike) and
  one more [R, T] batch array (its logprobs); kl_coef = 0: neither."""
  off = plan(tiny_config())
  cfg = tiny_config()
  cfg.algorithm.update(kl_type="k3", kl_coef=0.1)
  on = plan(validate(cfg))
  assert off.reference == 0 and on.reference == on.params == 461_824  # the hand-calculated parameter bytes
  assert on.activations["batch arrays"] == 8 * 16 * 64 * 4 and off.activations["batch arrays"] == 7 * 16 * 64 * 4
  assert on.total - off.total == on.params + 16 * 64 * 4
  assert "KL reference policy parameters" in format_plan(on, 80)
  assert "KL reference" not in format_plan(off, 80)


def test_kl_reference_from_another_checkpoint_uses_its_architecture(tmp_path):
  from codjax.models import init_model, save_pretrained

  ref_dir = str(tmp_path / "ref")
  save_pretrained(init_model(preset("tiny", num_hidden_layers=1)), ref_dir)
  cfg = tiny_config()
  cfg.algorithm.update(kl_type="k3", kl_coef=0.1, ref_model_path=ref_dir)
  p = plan(validate(cfg))
  # one layer instead of two: the policy's bytes less one layer's share of the hand calculation above (the
  # [L, ...] terms halve: norms, q, k, v, o, q/k norms, gate, up, down; embedding and final norm stay)
  layer = (2 * 128 + 2 * 64 * 2 * 32 + 2 * (2 * 64 * 1 * 32) + 2 * 2 * 32 * 64 + 2 * 32 + 2 * 32 + 2 * 128
           + 3 * (2 * 64 * 192)) // 2
  assert p.reference == p.params - 4 * layer


def test_unknown_engine_is_an_error():
  cfg = tiny_config()
  cfg.rollout.engine = "sglang"
  with pytest.raises(ValueError, match="unknown rollout engine 'sglang'"):
    plan(cfg)


def test_memory_plan_imports_no_trainer():
  """The plan needs the optimizer settings, not the training loop (nor private helpers of rl.batch)."""
  code = "import sys, codjax.train.memory_plan; print(sorted(m for m in sys.modules if m.startswith('codjax.train')))"
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert out.returncode == 0, out.stderr
  assert "codjax.train.loop" not in out.stdout and "codjax.train.memory_plan" in out.stdout


# -- the Qwen3.5/3.6 hybrid ------------------------------------------------------------------------------------
PDE_27B = os.path.join(ROOT, "experiments", "pde_discovery_qwen3_6_27b.py")


def _27b_on_one_node():
  cfg = load_experiment(PDE_27B).get_config()
  cfg.mesh.data = 1  # one node of 8 devices: fsdp 8
  return validate(cfg)


def test_qwen36_27b_on_8_devices_equals_hand_calculation():
  p = plan(_27b_on_one_node(), devices=8, device_memory_gib=141)
  a = p.arch
  assert p.arch_source.startswith("model.arch=qwen3.6-27b") and a.model_type == "qwen3_5"
  assert p.mesh == {"data": 1, "fsdp": 8, "tensor": 1, "expert": 1}
  # float32 parameters: everything with an embedding axis (D = 5120) splits 8 ways over fsdp; what has none
  # is replicated: the 2 x 64 layer norms and the final norm, q/k norms of the 16 full layers, and per linear
  # layer the depthwise conv [10240 channels x 4], dt_bias and A_log [48] and the output norm [128]
  replicated = 2 * 64 * 5120 + 5120 + 16 * 2 * 256 + 48 * (10240 * 4 + 2 * 48 + 128)
  assert (a.num_params() - replicated) % 8 == 0
  assert p.params == 4 * ((a.num_params() - replicated) // 8 + replicated)
  assert abs(p.params - 4 * a.num_params() / 8) / p.params < 1e-3  # ~fully sharded: 13.4 GB per device
  assert p.grads == 2 * p.params and p.optimizer == 2 * p.params + 2 * 4
  # 448 episodes over 19 microbatches x 8 shards: 4 rows of 22001 tokens per device per microbatch
  assert (p.episodes, p.rows_per_device, p.seq_len) == (448, 4, 22001)
  n = 4 * 22001
  # per-token bytes (bf16 compute): linear layer = activations, conv inputs / outputs (float32), gated norm,
  # DeltaNet chunk tensors (chunk 64), MLP; full layer = gated attention (cuDNN: 4 bytes per head) + MLP
  linear = (2 * (4 * 5120 + 2 * 6144) + 4 * 11 * 10240 + 20 * 6144
            + 4 * 48 * (9 * 64 + 6 * 128 + 5 * 128 + 128 * 128 // 64) + 8 * 16 * 128 + 3 * 48 * 64 + 2 * 6 * 17408)
  full = 2 * (4 * 5120 + 7 * 24 * 256 + 4 * 4 * 256) + 4 * 24 + 2 * 6 * 17408
  assert p.activations["saved layer activations (remat full)"] == 64 * n * 2 * 5120  # every layer's input
  assert linear > full and p.activations["working layer (backward)"] == n * linear  # one layer recomputed
  assert p.activations["attention mask"] == 4 * 22001**2 + 22001**2
  assert p.activations["hidden states and rope"] == 2 * n * 5120 * 2 + 2 * n * 32 * 4  # rotary 64
  # the JAX sampler: 64 + 1 slots rounded to 72 (a multiple of the 8 batch shards), 9 per device; KV of the
  # 16 full layers in bf16, and per slot and linear layer a float32 state [48, 128, 128] plus 3 inputs of the
  # 10240 conv channels
  s = 18_000 + 4_000 + 1
  assert p.engine == {"jax engine KV cache (72 slots x 22001)": 2 * 16 * 9 * 4 * 256 * s * 2,
                      "jax engine DeltaNet state (float32)": 48 * 9 * 48 * 128 * 128 * 4,
                      "jax engine convolution inputs": 48 * 9 * 10240 * 3 * 2,
                      "jax engine parameter copy": p.params}
  text = format_plan(p, 141)
  assert "16 gated-attention + 48 Gated DeltaNet layers" in text and "26.90 B parameters" in text


def test_qwen36_35b_a3b_experts_split_over_the_expert_axis():
  cfg = _27b_on_one_node()
  cfg.mesh.update(fsdp=1, expert=8)
  p = plan(cfg, devices=8, model_preset="qwen3.6-35b-a3b")
  a = p.arch
  assert a.is_moe and p.mesh == {"data": 1, "fsdp": 1, "tensor": 1, "expert": 8}
  # only the routed experts' weights [40, 256, ...] split (256 / 8 = 32 experts per device); the rest of the
  # model is replicated (no fsdp, no tensor)
  experts = 40 * 256 * 3 * 2048 * 512
  assert p.params == 4 * (experts // 8 + a.num_params() - experts)
  # the batch splits over the expert axis as well: 8 shards, 4 rows per device per microbatch
  assert p.rows_per_device == 4
  n = 4 * 22001
  assert p.activations["router logits (MoE balancing loss)"] == 40 * n * 256 * 4
  assert p.activations["saved layer activations (remat full)"] == 40 * n * 2 * 2048
  assert p.engine["jax engine DeltaNet state (float32)"] == 30 * 9 * 32 * 128 * 128 * 4
  assert p.engine["jax engine KV cache (72 slots x 22001)"] == 2 * 10 * 9 * 2 * 256 * 22001 * 2
  assert "256 experts top-8" in format_plan(p, 141) and "expert=8" in format_plan(p, 141)
  # fsdp 8 instead: the embedding dimension (2048) splits everything but the norms and per-head vectors
  q = plan(_27b_on_one_node(), devices=8, model_preset="qwen3.6-35b-a3b")
  assert abs(q.params - 4 * a.num_params() / 8) / q.params < 1e-3


def test_mesh_blocks_without_the_expert_axis_and_hybrid_tiny_configs():
  import ml_collections

  assert mesh_sizes(ml_collections.ConfigDict(dict(data=2, fsdp=-1, tensor=1)), devices=8) == {
      "data": 2, "fsdp": 4, "tensor": 1, "expert": 1}
  c = base_config()
  c.model.update(make_tiny=True, path="/nonexistent/tiny_hybrid")
  c.model.tiny.update(preset="tiny-hybrid-moe", num_hidden_layers=4)
  arch, source = resolve_architecture(validate(c))
  assert source == "model.tiny (make_tiny)" and arch.is_moe and arch.vocab_size == 512 and arch.full_layers == (3,)

