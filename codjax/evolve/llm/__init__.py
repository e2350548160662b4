"""An LLM evolver for TerminalSimulator tasks through any text engine (Environment Evolution paper,
arXiv 2609.04128, Sec. 4.1 and Figure 2; docs/methods/environment_evolution.md).

The engine is a callable ``generate(prompts: list[str]) -> list[str]`` (``codjax.train.loop.Trainer.generate``,
a JAX sampler backend, a vLLM engine or an OpenAI-compatible server behind the same signature). Modules, one job
each: ``jsonout`` (one JSON object out of model text), ``rubrics`` (the rubric bank that grows from failures),
``prompts`` (the prompt texts), ``proposer`` (extract and edit the pair sequence), ``reviewer`` (accept or reject
a plan against the rubrics), ``modifier`` (a structured edit of the task data), ``evolver`` (the two loops,
verification in the simulator, repair budget, cross-direction fallback and the attempt record).
"""

from codjax.evolve.llm.evolver import Attempt, EvolveResult, LineageEvolver, LLMEvolver
from codjax.evolve.llm.rubrics import DEFAULT_RUBRICS, RubricBank

__all__ = ["Attempt", "DEFAULT_RUBRICS", "EvolveResult", "LLMEvolver", "LineageEvolver", "RubricBank"]
