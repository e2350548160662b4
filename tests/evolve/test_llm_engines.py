"""The LLM evolver's engine callable over an OpenAI-compatible server (a local stub speaking the chat API)."""

import http.server
import json
import threading

import pytest

from codjax.evolve.llm.engines import make_generate


@pytest.fixture
def chat_server():
  seen = []

  class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
      pass

    def do_POST(self):
      body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
      seen.append((self.path, body))
      text = "reply to: " + body["messages"][-1]["content"]
      data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}]}).encode()
      self.send_response(200)
      self.send_header("Content-Type", "application/json")
      self.send_header("Content-Length", str(len(data)))
      self.end_headers()
      self.wfile.write(data)

  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  server.daemon_threads = True
  threading.Thread(target=server.serve_forever, daemon=True).start()
  yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
  server.shutdown()
  server.server_close()


def test_server_generate_sends_one_user_turn_per_prompt_and_returns_the_texts(chat_server):
  url, seen = chat_server
  generate = make_generate(server_url=url, server_model="evolver-model", max_tokens=17, temperature=0.5, seed=3)
  assert generate(["plan A", "plan B"]) == ["reply to: plan A", "reply to: plan B"]
  assert generate(["again"]) == ["reply to: again"]
  assert [p for p, _ in seen] == ["/v1/chat/completions"] * 3
  bodies = [b for _, b in seen]
  assert {b["model"] for b in bodies} == {"evolver-model"} and {b["max_tokens"] for b in bodies} == {17}
  assert sorted(b["messages"][0]["content"] for b in bodies) == ["again", "plan A", "plan B"]
  assert all(len(b["messages"]) == 1 and b["messages"][0]["role"] == "user" for b in bodies)
  assert all(b["temperature"] == 0.5 for b in bodies)
  first_call = {b["seed"] for b in bodies if b["messages"][0]["content"] != "again"}
  assert len(first_call) == 2 and next(b["seed"] for b in bodies if b["messages"][0]["content"] == "again") \
      not in first_call  # every request and every call gets its own seed


def test_make_generate_needs_exactly_one_engine():
  with pytest.raises(ValueError, match="exactly one engine"):
    make_generate()
  with pytest.raises(ValueError, match="exactly one engine"):
    make_generate(model_path="/m", server_url="http://x/v1")
  with pytest.raises(ValueError, match="server_model"):
    make_generate(server_url="http://x/v1")
