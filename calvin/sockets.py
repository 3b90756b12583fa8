"""What every Calvin websocket consumer shares: a send that meets a closed socket ends the
consumer as a disconnect would.

uvicorn raises ClientDisconnected from a send once the peer has gone (a host killed, a tab
closed) while its websocket.disconnect is still queued behind the message being handled.
Channels lets that exception end the consumer without calling disconnect(), so a host would
stay "connected" until its heartbeat lapsed and a page's groups would never be left.
"""

import logging

from channels.consumer import get_handler_name
from uvicorn.protocols.utils import ClientDisconnected

log = logging.getLogger(__name__)

ABNORMAL_CLOSURE = 1006  # RFC 6455: the connection went without a close frame


class EndsOnClosedSocket:
    """Mixin before a Channels websocket consumer class."""

    async def dispatch(self, message):
        try:
            if self.without_database(message):
                # Channels closes stale database connections before every handler, through a
                # hop to its one thread for sync code: per preview frame, that hop was most of
                # the host connection's cost. A handler that touches no database skips it.
                await getattr(self, get_handler_name(message))(message)
            else:
                await super().dispatch(message)
        except ClientDisconnected:
            if message.get("type") == "websocket.disconnect":
                raise
            log.info("%s: the peer went while %s was handled", type(self).__name__, message.get("type"))
            await self.websocket_disconnect({"type": "websocket.disconnect", "code": ABNORMAL_CLOSURE})

    def without_database(self, message) -> bool:
        """Whether the handler of this message touches no database (then nothing is closed first)."""
        return False
