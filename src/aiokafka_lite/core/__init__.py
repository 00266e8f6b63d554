"""What every layer shares: errors, small value types, declarative options, the concurrency
core (the one module that knows whether asyncio or trio runs), the description of the
clients' metrics, and ``health()``. Nothing here imports the layers above."""
