"""A chat platform stand-in with no database guard, for exactly-once tests.

It delivers by HTTP to the test's recorder (tests/support/recorder.py), whose address is
the thread's channel id, the way a Slack thread carries its channel. Nothing here or in
the recorder refuses a second delivery: only the claim and `delivered` stand in the way.
Register it with CALVIN_CHAT_ADAPTERS='{"record": "tests.support.recording_chat.RecordingChannel"}'.
"""

import json
import urllib.error
import urllib.request

from calvin.chat import ChatTemporaryError

KIND = "record"


class RecordingChannel:
    def _request(self, thread, path: str, body: dict | None = None) -> dict | None:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{thread.channel_id}{path}", data=data, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise ChatTemporaryError(f"recorder answered {exc.code}") from exc
        except OSError as exc:
            raise ChatTemporaryError(f"recorder unreachable: {exc}") from exc

    def delivered(self, *, thread, tool_call_id: int) -> dict | None:
        return self._request(thread, f"/deliveries/{tool_call_id}")

    def _deliver(self, thread, tool_call_id: int, kind: str) -> dict:
        return self._request(thread, "/deliveries", {"tool_call_id": tool_call_id, "kind": kind})

    def post_message(self, *, thread, message, tool_call_id: int) -> dict:
        return self._deliver(thread, tool_call_id, "message")

    def post_card(
        self, *, thread, items: list, blocks: list, fallback_text: str, tool_call_id: int | None, author: str = "agent"
    ) -> dict:
        return self._deliver(thread, tool_call_id, "card")

    def upload_file(self, *, thread, tool_call_id: int, **file) -> dict:
        return self._deliver(thread, tool_call_id, "file")
