"""Messages between the grader and a sandboxed notebook: length-prefixed `torch.save` payloads over two pipes.

The grader's side reads with a deadline and a size cap, and loads with `weights_only=True`, so a submission can
send back tensors, numbers, strings and containers of them, but never an object that runs code when loaded.
"""

import io
import os
import select
import struct
import time

import torch

HEADER = struct.Struct(">Q")


class ChannelClosed(EOFError):
    """The other side closed its end (in the grader: the sandbox exited or was killed)."""


class ChannelTimeout(TimeoutError):
    """No whole message arrived before the deadline."""


class MessageTooLarge(ValueError):
    """A message was longer than the reader accepts."""


def send(fd: int, message) -> None:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    payload = buffer.getvalue()
    data = HEADER.pack(len(payload)) + payload
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, remaining = [], size
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout(f"no message within the time allowed ({size - remaining} of {size} bytes came)")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("the other side closed the channel")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, *, trusted: bool, deadline: float | None = None, max_bytes: int = 1 << 30):
    """The next message. `trusted=False` (the grader reading a submission's answers) loads only plain data."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > max_bytes:
        raise MessageTooLarge(f"a message of {size:,} bytes, over the limit of {max_bytes:,}")
    payload = _read_exactly(fd, size, deadline)
    return torch.load(io.BytesIO(payload), weights_only=not trusted)
