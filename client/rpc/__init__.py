"""The client's RPC edge: the only client code that knows gRPC and protobuf.

``coordinator_gateway`` and ``tablet_gateway`` have one method per RPC, lakelog dataclasses in and
out, every failure raised as a :class:`~lakelog.errors.LakelogError`; ``leader_router`` finds a
bucket's leader and retries by the one ``retry_policy``.
"""
