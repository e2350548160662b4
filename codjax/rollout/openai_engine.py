"""``OpenAIEngine``: a client for OpenAI-compatible HTTP servers (vLLM, SGLang, hosted APIs).

It evaluates a served model or an API model through the same CoD workflows as the local engines:

* ``chat(conversations, params)`` posts one ``/chat/completions`` request per conversation (the server
  applies its chat template) and returns ``Completion`` records with ``text`` set. With ``logprobs=True``
  the per-token logprobs are filled, and the token ids too when the server reports them (vLLM does with
  ``extra_body={"return_token_ids": True}``, or with ``"return_tokens_as_token_ids": True``).
* ``generate(prompts, params)`` is the token-level ``RolloutEngine`` call over ``/completions`` with
  token-id prompts. It uses vLLM's extensions to the OpenAI schema (a list of ints as the prompt,
  ``return_token_ids``, ``stop_token_ids``, ``ignore_eos``), so it needs a vLLM server. The logprobs are
  whatever the server computes: start it with ``--logprobs-mode processed_logprobs`` to get logprobs of
  the sampling distribution (``codjax.rollout.vllm_engine`` explains the modes).
* ``OpenAIBackend`` adapts ``chat`` to the agents' ``Backend`` protocol (text in, text out).

The served model's weights belong to the server, so there is no ``update_weights``: this engine is for
evaluation. Session ids are accepted and ignored (the server's prefix cache does any reuse).

Requests: at most ``max_concurrency`` in flight (a thread pool, one HTTP session per thread), each attempt
bounded by ``timeout_s`` (connect and read). Connection errors, timeouts, HTTP 429 and 5xx are retried up
to ``max_retries`` times with exponential backoff, ``min(max_backoff_s, backoff_s * 2**attempt)``,
stretched to the server's ``Retry-After`` when it sends one; other 4xx errors are raised at once. The
retrying is urllib3's ``Retry`` on the session's ``HTTPAdapter`` (``_EngineRetry``: urllib3's loop and
counters, this schedule instead of urllib3's, whose first retry has no delay and which ignores fractional
``Retry-After`` values). urllib3 retries what happens before the response headers arrive; a body cut off
after them (``ChunkedEncodingError``) is read by requests outside that loop and raised at once.

Mapping of ``SamplingParams`` in chat: temperature, top_p, max_tokens (under ``max_tokens_key``, e.g.
``"max_completion_tokens"`` for OpenAI's newer models) and seed are standard; top_k is sent only when set
(servers without it reject the request); stop_token_ids are not sent, since a chat turn ends at the
template's end-of-turn token on the server. A seeded call gives request i the seed derived from
(seed, i), as the vLLM engine does. ``extra_body`` is merged into every request body.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import threading
import time
from typing import Any, Sequence

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from codjax.rollout.base import Completion, SamplingParams
from codjax.rollout.vllm_engine import request_seed

_TRANSIENT_EXCEPTIONS = (requests.ConnectionError, requests.Timeout)  # raised once urllib3's retries are spent
RETRY_STATUSES = frozenset([429, *range(500, 600)])


class OpenAIHTTPError(RuntimeError):
  """A request failed for good: a non-retryable HTTP error, or retries exhausted."""

  def __init__(self, message: str, status: int | None = None, body: str | None = None):
    super().__init__(message)
    self.status = status
    self.body = body


def _retry_after_s(headers) -> float | None:
  value = headers.get("Retry-After")
  try:
    return max(0.0, float(value)) if value is not None else None
  except ValueError:  # an HTTP date: fall back to our own backoff
    return None


def backoff_delay(backoff_s: float, max_backoff_s: float, attempt: int, retry_after_s: float | None = None) -> float:
  """Seconds to wait before retry ``attempt + 1`` (attempt counts from 0)."""
  delay = min(max_backoff_s, backoff_s * 2**attempt)
  if retry_after_s is not None:
    delay = max(delay, min(retry_after_s, max_backoff_s))
  return delay


class _EngineRetry(Retry):
  """urllib3's ``Retry`` with ``backoff_delay``'s schedule (``backoff_factor`` is ``backoff_s``).

  Retried: connection errors and read timeouts (any method: a chat request has no side effects worth
  protecting) and exactly the statuses of ``status_forcelist`` (``RETRY_AFTER_STATUS_CODES`` is emptied so
  a 413 with ``Retry-After`` is not retried). ``Retry-After`` in seconds, fractions included, stretches the
  delay up to ``max_backoff_s``; an HTTP-date value falls back to the backoff.
  """

  RETRY_AFTER_STATUS_CODES = frozenset()

  def __init__(self, *args, max_backoff_s: float = 30.0, **kwargs):
    super().__init__(*args, **kwargs)
    self.max_backoff_s = max_backoff_s

  def new(self, **kwargs) -> "_EngineRetry":
    out = super().new(**kwargs)  # urllib3 rebuilds from its own fields only
    out.max_backoff_s = self.max_backoff_s
    return out

  def _failed_attempts(self) -> int:
    return len(list(itertools.takewhile(lambda h: h.redirect_location is None, reversed(self.history))))

  def get_backoff_time(self) -> float:
    n = self._failed_attempts()
    return backoff_delay(self.backoff_factor, self.max_backoff_s, n - 1) if n else 0.0

  def sleep_for_retry(self, response) -> bool:
    retry_after = _retry_after_s(response.headers)
    if retry_after is None:
      return False
    time.sleep(backoff_delay(self.backoff_factor, self.max_backoff_s, max(self._failed_attempts() - 1, 0),
                             retry_after))
    return True


def retry_policy(max_retries: int, backoff_s: float, max_backoff_s: float) -> Retry:
  """The engine's retry policy as a urllib3 ``Retry`` (mount it with ``HTTPAdapter(max_retries=...)``).
  Exhausted status retries return the last response (``raise_on_status=False``) so its body is reported."""
  return _EngineRetry(total=max_retries, connect=max_retries, read=max_retries, status=max_retries,
                      allowed_methods=None, status_forcelist=RETRY_STATUSES, backoff_factor=backoff_s,
                      raise_on_status=False, respect_retry_after_header=True, max_backoff_s=max_backoff_s)


class OpenAIEngine:
  """OpenAI-compatible HTTP client; ``base_url`` includes the API prefix, e.g. ``http://host:8000/v1``."""

  def __init__(self, base_url: str, model: str, api_key: str | None = None, *, max_concurrency: int = 8,
               timeout_s: float = 60.0, max_retries: int = 3, backoff_s: float = 0.5, max_backoff_s: float = 30.0,
               extra_body: dict[str, Any] | None = None, max_tokens_key: str = "max_tokens"):
    if max_concurrency < 1:
      raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    if timeout_s <= 0:
      raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if max_retries < 0:
      raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    if backoff_s < 0 or max_backoff_s < 0:
      raise ValueError("backoff_s and max_backoff_s must be >= 0")
    self.base_url = base_url.rstrip("/")
    self.model = model
    api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    self._headers = {"Content-Type": "application/json"}
    if api_key:
      self._headers["Authorization"] = f"Bearer {api_key}"
    self.timeout_s = timeout_s
    self.max_retries = max_retries
    self.backoff_s = backoff_s
    self.max_backoff_s = max_backoff_s
    self.extra_body = dict(extra_body or {})
    self.max_tokens_key = max_tokens_key
    self._retry = retry_policy(max_retries, backoff_s, max_backoff_s)
    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_concurrency,
                                                       thread_name_prefix="openai-engine")
    self._local = threading.local()
    self._sessions: list[requests.Session] = []
    self._lock = threading.Lock()
    self._closed = False

  # -- HTTP --------------------------------------------------------------------------------------------

  def _session(self) -> requests.Session:
    s = getattr(self._local, "session", None)
    if s is None:
      s = self._local.session = requests.Session()
      adapter = HTTPAdapter(max_retries=self._retry)
      s.mount("http://", adapter)
      s.mount("https://", adapter)
      with self._lock:
        self._sessions.append(s)
    return s

  def backoff_delay(self, attempt: int, retry_after_s: float | None = None) -> float:
    """Seconds to wait before retry ``attempt + 1`` (attempt counts from 0)."""
    return backoff_delay(self.backoff_s, self.max_backoff_s, attempt, retry_after_s)

  def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POSTs JSON to ``base_url + path`` with the retry policy; returns the decoded JSON body."""
    url = f"{self.base_url}/{path.lstrip('/')}"
    gave_up = f"(gave up after {self.max_retries + 1} attempts)"
    try:
      r = self._session().post(url, json=payload, headers=self._headers, timeout=self.timeout_s)
    except requests.exceptions.ChunkedEncodingError as e:
      raise OpenAIHTTPError(f"POST {url}: the response body was cut off: {e}") from e
    except _TRANSIENT_EXCEPTIONS as e:
      raise OpenAIHTTPError(f"POST {url}: {type(e).__name__}: {e} {gave_up}") from e
    if r.status_code == 200:
      try:
        return r.json()
      except ValueError as e:
        raise OpenAIHTTPError(f"POST {url}: invalid JSON in the response: {r.text[:500]!r}", 200, r.text) from e
    msg = f"POST {url} -> HTTP {r.status_code}: {r.text[:500]}"
    if r.status_code in RETRY_STATUSES:  # urllib3 hands back a retryable status only when retries are spent
      msg += f" {gave_up}"
    raise OpenAIHTTPError(msg, r.status_code, r.text)

  def _map(self, fn, items: Sequence[Any]) -> list[Any]:
    if self._closed:
      raise RuntimeError("OpenAIEngine is closed")
    return list(self._pool.map(fn, items))

  # -- chat --------------------------------------------------------------------------------------------

  def _sampling_fields(self, params: SamplingParams, index: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": self.model, "temperature": params.temperature, "top_p": params.top_p,
                            self.max_tokens_key: params.max_tokens}
    if params.top_k:
      body["top_k"] = params.top_k
    if params.seed is not None:
      body["seed"] = request_seed(params.seed, index)
    return body

  def chat(self, conversations: Sequence[Sequence[dict[str, str]]], params: SamplingParams, *,
           logprobs: bool = False) -> list[Completion]:
    """One chat completion per conversation (lists of ``{"role", "content"}``), in input order."""

    def one(item):
      i, messages = item
      body = self._sampling_fields(params, i)
      body["messages"] = [{"role": m["role"], "content": m["content"]} for m in messages]
      if logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = 0
      body.update(self.extra_body)
      return self._chat_completion(self.post("chat/completions", body))

    return self._map(one, list(enumerate(conversations)))

  @staticmethod
  def _chat_completion(data: dict[str, Any]) -> Completion:
    try:
      choice = data["choices"][0]
      text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError) as e:
      raise OpenAIHTTPError(f"malformed chat completion response: {str(data)[:500]}") from e
    entries = (choice.get("logprobs") or {}).get("content") or []
    lps = [float(e["logprob"]) for e in entries]
    ids = [int(t) for t in choice.get("token_ids") or []]
    if not ids and entries and all(str(e.get("token", "")).startswith("token_id:") for e in entries):
      ids = [int(e["token"].split(":", 1)[1]) for e in entries]
    return Completion(token_ids=ids, logprobs=lps, finish_reason=choice.get("finish_reason") or "stop", text=text)

  # -- token-level generation (vLLM servers) -----------------------------------------------------------

  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[int] | None = None) -> list[Completion]:
    """Token ids in, token ids + logprobs out, through ``/completions`` (needs vLLM's schema extensions)."""
    del session_ids

    def one(item):
      i, prompt = item
      body = self._sampling_fields(params, i)
      body.update(prompt=[int(t) for t in prompt], logprobs=0, return_token_ids=True, ignore_eos=True,
                  stop_token_ids=list(params.stop_token_ids), skip_special_tokens=False)
      body.update(self.extra_body)
      data = self.post("completions", body)
      try:
        choice = data["choices"][0]
        ids = choice.get("token_ids")
        lps = (choice.get("logprobs") or {}).get("token_logprobs")
      except (KeyError, IndexError, TypeError) as e:
        raise OpenAIHTTPError(f"malformed completion response: {str(data)[:500]}") from e
      if ids is None or lps is None or len(ids) != len(lps):
        raise OpenAIHTTPError("the server returned no token ids / logprobs for a token-id prompt; "
                              "OpenAIEngine.generate needs a vLLM OpenAI-compatible server")
      return Completion(token_ids=[int(t) for t in ids], logprobs=[float(x) for x in lps],
                        finish_reason=choice.get("finish_reason") or "stop", text=choice.get("text"))

    return self._map(one, list(enumerate(prompts)))

  def end_session(self, session_id: int) -> None:
    del session_id  # stateless client

  def close(self) -> None:
    if self._closed:
      return
    self._closed = True
    self._pool.shutdown(wait=True)
    with self._lock:
      for s in self._sessions:
        s.close()
      self._sessions.clear()

  def __enter__(self) -> "OpenAIEngine":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


class OpenAIBackend:
  """The agents' ``Backend`` over ``OpenAIEngine.chat``: each episode's ``messages`` -> assistant text."""

  def __init__(self, engine: OpenAIEngine, params: SamplingParams):
    self.engine = engine
    self.params = params

  def respond(self, episodes) -> list[str]:
    if not episodes:
      return []
    return [c.text for c in self.engine.chat([ep.messages for ep in episodes], self.params)]

  def release(self, episode) -> None:
    del episode  # no per-episode state
