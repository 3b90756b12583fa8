"""What runs on a host: the session runner, its sandbox and the agent providers.

Nothing here touches the database or Redis (a host holds no credentials for them): the
daemon receives turns over its websocket and hands them to a runner with plain values.
"""
