"""The asyncio client (``lakelog.aio``): the same core as the sync client, awaited."""
