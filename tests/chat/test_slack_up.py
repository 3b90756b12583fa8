"""A newcomer sets SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET before `up` (embedded: SQLite, the
worker in-process, a local host) and has a working Slack app: a mention starts a session in
the demo workspace, 👀 says it was taken, and the demo agent's reply comes back in the thread."""

import json

from tests.chat.conftest import SlackSender
from tests.conftest import wait_for
from tests.sessions.test_up import LogFile, start_up, stop
from tests.support.slack_requests import event_body, mention

TOKEN = "xoxb-newcomer-0001"
SECRET = "newcomer-signing-secret"


def test_embedded_up_with_the_two_slack_variables_answers_a_mention_in_its_thread(tmp_path, standin):
    standin.add_team(team_id="T0NEW", bot_token=TOKEN, bot_user_id="U0CALVIN", bot_id="B0CALVIN")
    standin.channels["C0GENERAL"].append({"type": "message", "ts": "1700000600.000100", "user": "U0ANN", "text": "x"})
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": standin.api_url}
    output = LogFile(tmp_path / "up.log")
    process, base = start_up(tmp_path, env, output)
    try:
        assert f"Event Subscriptions, Request URL: {base}/slack/events" in output.text()
        event = mention(user="U0ANN", channel="C0GENERAL", ts="1700000600.000100", text="hi there", bot_user="U0CALVIN")
        response = SlackSender(base, SECRET).event(event_body(team_id="T0NEW", event=event))
        assert response.status_code == 200, response.text

        def replies():
            return [
                c.params for c in standin.ok_calls_of("chat.postMessage") if c.params.get("thread_ts") == event["ts"]
            ]

        # The demo agent (the script, no Claude Code login here): its reply, and its card, which
        # says what it was told, in the thread; its file there too.
        wait_for(lambda: any("I am Calvin's demo agent" in (r.get("text") or "") for r in replies()), timeout=90)
        wait_for(lambda: "You said: hi there" in json.dumps(replies()), timeout=30)
        (upload,) = wait_for(lambda: standin.ok_calls_of("files.completeUploadExternal"), timeout=30)
        assert (upload.params["channel_id"], upload.params["thread_ts"]) == ("C0GENERAL", event["ts"])
        (eyes,) = standin.ok_calls_of("reactions.add")
        assert (eyes.params["channel"], eyes.params["timestamp"], eyes.params["name"]) == (
            "C0GENERAL",
            "1700000600.000100",
            "eyes",
        )
        for call in standin.calls_of("chat.postMessage"):
            assert call.headers.get("Authorization") == f"Bearer {TOKEN}"
        assert TOKEN not in output.text() and TOKEN not in json.dumps(replies())
        after_block = output.text().split("Calvin is running. Stop it with Ctrl+C.\n", 1)[1]
        assert "`token` will be unused" not in after_block, after_block
    finally:
        stop(process)
