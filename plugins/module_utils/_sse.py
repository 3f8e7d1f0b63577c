# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""An incremental parser of Server-Sent Events, the ``text/event-stream`` of streaming inference APIs.

OpenAI-style chat completions, SGLang's ``/generate`` and the LiteLLM gateway stream ``data: {JSON}`` events, each
ended by a blank line, and end the stream with ``data: [DONE]``. ``SSEParser.feed(chunk, now)`` takes the raw bytes
as they arrive, in chunks of any size (an event, a line, even a ``\\r\\n`` pair may be split across chunks), and
returns the events that the chunk completed, stamped with ``now``: the arrival time of the chunk that completed them.

It follows the WHATWG event-stream format (``\\r\\n``, ``\\n`` and ``\\r`` line ends; ``:`` comment lines such as
``: keep-alive``; several ``data:`` lines joined by ``\\n``; ``event:`` names; a leading byte-order mark, even one
split across chunks), but it is stricter than a browser, because a measurement must not silently lose what the server
sent:
- bytes that are not UTF-8 raise ``SSEError`` (a browser would substitute U+FFFD);
- a line that is not a ``data``, ``event``, ``id`` or ``retry`` field or a comment raises (a browser ignores it): an
  inference server sends nothing else, so such a line means the body is not the stream it claims to be;
- with ``expect_json`` (the default), data that is not JSON raises (JSON nested deeper than Python's recursion limit
  too); ``[DONE]`` is the one non-JSON data;
- an event after ``[DONE]`` raises, and ``close()`` raises when the stream ended without ``[DONE]`` or in the middle
  of an event.

Events are ``SSEEvent(kind, name, data, value, time)``: ``kind`` is ``data``, ``done`` (``data: [DONE]``) or
``error`` (an ``event: error``, or a JSON object with a non-null ``error`` key, as SGLang, OpenAI and LiteLLM send
when a request fails after its 200 status); ``name`` is the ``event:`` name (``message`` by default); ``data`` is the
text; ``value`` is the parsed JSON (None for ``[DONE]``, and for an error event whose data is not JSON).

Standard library only, Python 3.8+ syntax: this file may run on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections import namedtuple

DONE = "[DONE]"
# An event larger than this is not a token stream (SGLang's /generate resends the whole text in every event, so a
# long output makes events of a few hundred KB; this leaves room for far more).
MAX_EVENT_BYTES = 64 * 1024 * 1024
SHOWN_CHARS = 200
_BOM = b"\xef\xbb\xbf"
_IGNORED_FIELDS = (b"id", b"retry")

SSEEvent = namedtuple("SSEEvent", ["kind", "name", "data", "value", "time"])


class SSEError(ValueError):
    """The bytes are not a complete, well-formed event stream of the kind expected."""


def _show(raw):
    """A short printable form of ``raw`` (bytes or text) for error messages."""
    if len(raw) > SHOWN_CHARS:
        return "%r... (%d more)" % (raw[:SHOWN_CHARS], len(raw) - SHOWN_CHARS)
    return repr(raw)


class SSEParser:
    """Feed it bytes with ``feed(chunk, now)``; call ``close()`` at the end of the body. See the module docstring."""

    def __init__(self, expect_json=True):
        self.expect_json = expect_json
        self.done = False
        self.events = 0
        self.comments = 0
        self._pending = b""
        self._skip_lf = False
        self._started = False
        self._head = b""  # the first bytes while they may still be a byte-order mark split across chunks
        self._data = []
        self._name = None

    def feed(self, chunk, now):
        """Parse ``chunk`` (bytes); return the list of events it completed, each with ``time=now``."""
        if not chunk:
            return []
        if not self._started:
            head = self._head + chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._head = head
                return []
            self._started = True
            self._head = b""
            chunk = head[len(_BOM):] if head.startswith(_BOM) else head
            if not chunk:
                return []
        if self._skip_lf:
            # The previous chunk ended with '\r', already taken as a line end: a '\n' right after it is its pair.
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._pending + chunk if self._pending else chunk
        if b"\r" in buffer:
            self._skip_lf = buffer.endswith(b"\r")
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > MAX_EVENT_BYTES:
            raise SSEError("a line of more than %d bytes without a line end: not an event stream; it starts %s"
                           % (MAX_EVENT_BYTES, _show(self._pending)))
        events = []
        for line in lines:
            if not line:
                event = self._dispatch(now)
                if event is not None:
                    events.append(event)
            elif line[:1] == b":":
                self._text(line, "comment")
                self.comments += 1
            else:
                self._field(line)
        return events

    def close(self):
        """The body ended: raise SSEError unless ``[DONE]`` came and no event or line was left half-sent."""
        pending = (self._head + self._pending).strip()
        if pending or self._data:
            what = pending or b"\n".join(self._data)
            raise SSEError("the stream ended in the middle of an event (no blank line after it): %s" % _show(what))
        if not self.done:
            raise SSEError("the stream ended without data: [DONE] after %d events: the server stopped early or the "
                           "connection was cut" % self.events)

    def _text(self, raw, what):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SSEError("%s is not UTF-8 (%s): %s" % (what, exc.reason, _show(raw))) from None

    def _field(self, line):
        field, _colon, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._data.append(value)
            if len(self._data) > 1 and sum(len(part) for part in self._data) > MAX_EVENT_BYTES:
                raise SSEError("an event of more than %d bytes: not a token stream" % MAX_EVENT_BYTES)
        elif field == b"event":
            self._name = self._text(value, "event name")
        elif field not in _IGNORED_FIELDS:
            raise SSEError("line is not an SSE field (data:, event:, id:, retry:) or a ': comment': %s"
                           % _show(line))

    def _dispatch(self, now):
        """A blank line ends an event: build it, or nothing when no data came (a lone ``event:`` or ``id:``)."""
        name = self._name or "message"
        self._name = None
        if not self._data and name != "error":
            return None
        data = self._text(b"\n".join(self._data), "event data")
        self._data = []
        if self.done:
            raise SSEError("an event came after data: [DONE]: %s" % _show(data))
        self.events += 1
        if data == DONE and name == "message":
            self.done = True
            return SSEEvent("done", name, data, None, now)
        value = None
        if self.expect_json or name == "error":
            try:
                value = json.loads(data)
            except (ValueError, RecursionError) as exc:  # RecursionError: arrays or objects nested too deeply
                if name != "error":
                    reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
                    raise SSEError("event %d: data is not JSON (%s): %s" % (self.events, reason, _show(data))) from None
        if name == "error" or (isinstance(value, dict) and value.get("error") is not None):
            return SSEEvent("error", name, data, value, now)
        return SSEEvent("data", name, data, value, now)
