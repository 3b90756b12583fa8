"""Put on a worker's PYTHONPATH: the worker SIGKILLs itself on its first channel-layer push,
which Calvin only makes after a commit. So the effect is committed and its live update was
never sent: the fault "killed between commit and push", exactly, without timing luck."""

import os
import signal

if os.environ.get("CALVIN_FAULT_DIE_ON_PUSH") == "1":
    from channels_redis.core import RedisChannelLayer

    async def _die(self, group, message):
        os.kill(os.getpid(), signal.SIGKILL)

    RedisChannelLayer.group_send = _die
