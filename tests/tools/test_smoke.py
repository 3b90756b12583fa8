import pytest

from sessions.models import Message
from tests.conftest import text_of, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def test_post_card_reaches_the_thread(agent):
    spec = {"root": "c", "elements": {"c": {"type": "Card", "props": {"title": "Hi"}}}}
    result = agent.call("post_card", {"spec": spec})
    assert not result.is_error, text_of(result)
    call = ToolCall.objects.get()
    wait_for(lambda: ToolCall.objects.get(id=call.id).status == "applied")
    assert Message.objects.get(tool_call=call).thread_id == agent.session.thread_id
