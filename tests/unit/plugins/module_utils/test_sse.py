# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The incremental SSE parser on the streams of tests/unit/fixtures/sse/ (see its README.md), fed whole, split at
every byte boundary, byte by byte, and with every line-end style."""

from itertools import pairwise
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._sse import SSEError, SSEEvent, SSEParser

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sse"


def raw(name):
    return (FIXTURES / name).read_bytes()


def parse(chunks, expect_json=True):
    """Feed ``chunks`` with times 0, 1, 2...; close; return the events and the parser."""
    parser = SSEParser(expect_json=expect_json)
    events = []
    for now, chunk in enumerate(chunks):
        events += parser.feed(chunk, now)
    parser.close()
    return events, parser


def shape(events):
    return [(e.kind, e.name, e.value) for e in events]


# fixture -> (kind, name, parsed value) of every event, in order
CASES = {
    "chat_stream.txt": [
        ("data", "message", {"id": "2f6c0e7c5b1a4d0c", "object": "chat.completion.chunk", "created": 1796032800,
                             "model": "qwen-27b", "choices": [{"index": 0, "delta": {
                                 "role": "assistant", "content": "", "reasoning_content": None, "tool_calls": None},
                                 "logprobs": None, "finish_reason": None, "matched_stop": None}], "usage": None}),
        ("data", "message", None), ("data", "message", None), ("data", "message", None),
        ("data", "message", {"id": "2f6c0e7c5b1a4d0c", "object": "chat.completion.chunk", "created": 1796032800,
                             "model": "qwen-27b", "choices": [],
                             "usage": {"prompt_tokens": 21, "total_tokens": 26, "completion_tokens": 5,
                                       "prompt_tokens_details": {"cached_tokens": 16}}}),
        ("done", "message", None),
    ],
    "generate_stream.txt": [("data", "message", None)] * 3 + [("done", "message", None)],
    "keepalive_multiline.txt": [
        ("data", "message", {"choices": [{"delta": {"content": "two lines"}}]}),
        ("data", "message", {"no_space_after_colon": True}),
        ("done", "message", None),
    ],
    "error_event.txt": [
        ("data", "message", {"choices": [{"delta": {"content": "Hi"}}]}),
        ("error", "error", None),
        ("done", "message", None),
    ],
    "error_json.txt": [
        ("error", "message", {"error": {"message": "litellm.RateLimitError: no deployments available",
                                        "type": "None", "param": None, "code": "429"}}),
        ("done", "message", None),
    ],
}


def compare(events, expected):
    assert [(k, n) for k, n, _v in expected] == [(e.kind, e.name) for e in events]
    for event, (_kind, _name, value) in zip(events, expected, strict=True):
        if value is not None:
            assert event.value == value


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_whole(name):
    events, parser = parse([raw(name)])
    compare(events, CASES[name])
    assert parser.done is True
    assert parser.events == len(CASES[name])
    assert all(e.time == 0 for e in events)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("line_end", [b"\r\n", b"\r"], ids=["crlf", "cr"])
def test_fixture_line_ends(name, line_end):
    events, _parser = parse([raw(name).replace(b"\n", line_end)])
    compare(events, CASES[name])


def test_chat_stream_text_and_values():
    events, parser = parse([raw("chat_stream.txt")])
    contents = [e.value["choices"][0]["delta"]["content"] for e in events[:4]]
    assert contents == ["", "The", " quiet link", " carries é"]
    assert events[-1] == SSEEvent("done", "message", "[DONE]", None, 0)
    assert parser.comments == 0


def test_comments_are_counted_and_ignored():
    _events, parser = parse([raw("keepalive_multiline.txt")])
    assert parser.comments == 4


def test_error_event_keeps_its_text():
    events, _parser = parse([raw("error_event.txt")])
    assert events[1].data == "upstream timed out"
    assert events[1].value is None


# line end -> (what ends an event, how many of its bytes must have arrived for the event to be complete)
EVENT_END = {b"\n": (b"\n\n", 2), b"\r\n": (b"\r\n\r\n", 3), b"\r": (b"\r\r", 2)}


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_split_at_every_byte_boundary(line_end):
    """Every two-chunk split of the stream gives the same events, stamped with the time of the completing chunk."""
    stream = raw("chat_stream.txt").replace(b"\n", line_end)
    whole, _parser = parse([stream])
    separator, needed = EVENT_END[line_end]
    ends, position = [], 0
    for _event in whole:
        position = stream.index(separator, position) + len(separator)
        ends.append(position - len(separator) + needed)
    assert len(ends) == 6
    for cut in range(1, len(stream)):
        events, _parser = parse([stream[:cut], stream[cut:]])
        assert shape(events) == shape(whole), cut
        assert [e.data for e in events] == [e.data for e in whole], cut
        assert [e.time for e in events] == [0 if end <= cut else 1 for end in ends], cut


def test_byte_by_byte():
    stream = raw("generate_stream.txt").replace(b"\n", b"\r\n")
    events, _parser = parse([stream[i:i + 1] for i in range(len(stream))])
    assert [e.value["meta_info"]["completion_tokens"] for e in events[:3]] == [1, 3, 5]
    assert events[-1].kind == "done"
    # The '\r' that ends the blank line completes the event; the '\n' after it is only its pair.
    assert events[0].time == stream.index(b"\r\n\r\n") + 2


def test_cr_at_chunk_end_then_lf():
    """A '\\r' ending one chunk and the '\\n' starting the next are one line end, not a blank line (which would
    end the event after its first line, '{"a":', and fail as not JSON)."""
    events, _parser = parse([b'data: {"a":\r', b'\ndata: 1}\r\n\r\n', b"data: [DONE]\r\n\r\n"])
    assert shape(events) == [("data", "message", {"a": 1}), ("done", "message", None)]
    assert events[0].data == '{"a":\n1}'
    assert [e.time for e in events] == [1, 2]


def test_bom_is_dropped():
    events, _parser = parse([b"\xef\xbb\xbfdata: {}\n\ndata: [DONE]\n\n"])
    assert shape(events) == [("data", "message", {}), ("done", "message", None)]


@pytest.mark.parametrize("cuts", [(1,), (2,), (1, 2), (3,)], ids=["1+2", "2+1", "1+1+1", "whole_then_rest"])
def test_bom_split_across_chunks_is_dropped(cuts):
    stream = b"\xef\xbb\xbfdata: {}\n\ndata: [DONE]\n\n"
    bounds = [0, *cuts, len(stream)]
    events, _parser = parse([stream[start:end] for start, end in pairwise(bounds)])
    assert shape(events) == [("data", "message", {}), ("done", "message", None)]


def test_deeply_nested_json_is_malformed_not_a_crash():
    with pytest.raises(SSEError, match="event 1: data is not JSON \\(nested too deeply\\)"):
        parse([b"data: " + b"[" * 100000 + b"\n\n"])


def test_deeply_nested_error_event_is_an_error_event():
    events, _parser = parse([b"event: error\ndata: " + b"[" * 100000 + b"\n\n", b"data: [DONE]\n\n"])
    assert shape(events) == [("error", "error", None), ("done", "message", None)]


def test_text_mode_takes_any_data():
    events, _parser = parse([b"data: plain words\n\ndata: [DONE]\n\n"], expect_json=False)
    assert events[0] == SSEEvent("data", "message", "plain words", None, 0)


def test_feed_of_nothing():
    assert SSEParser().feed(b"", 0) == []


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([raw("not_json.txt")], "event 2: data is not JSON"),
        ([raw("no_done.txt")], "the stream ended without data: [DONE] after 2 events"),
        ([raw("cut_mid_event.txt")], "the stream ended in the middle of an event"),
        ([raw("event_after_done.txt")], "an event came after data: [DONE]"),
        ([raw("html_error_page.txt")], "line is not an SSE field"),
        ([b""], "the stream ended without data: [DONE] after 0 events"),
        ([b"data: [DONE]\n"], "the stream ended in the middle of an event"),
        ([b'data: {"text": "\xff\xfe"}\n\n'], "event data is not UTF-8 (invalid start byte)"),
        ([b'data: {"text": "\xc3'], "the stream ended in the middle of an event"),
        ([b": keep-alive \xff\n\n"], "comment is not UTF-8"),
        ([b"event: \xff\n"], "event name is not UTF-8"),
        ([b"event: message\ndata: []\n\n", b"data: 1\n\n"], "the stream ended without data: [DONE] after 2 events"),
        ([b"\xef\xbb"], "the stream ended in the middle of an event"),
    ],
    ids=["not_json", "no_done", "cut_mid_event", "event_after_done", "html", "empty", "done_without_blank_line",
         "not_utf8", "cut_utf8", "comment_not_utf8", "name_not_utf8", "json_arrays_but_no_done", "only_part_of_a_bom"],
)
def test_malformed(chunks, message):
    with pytest.raises(SSEError) as caught:
        parse(chunks)
    assert message in str(caught.value)


def test_non_utf8_split_across_chunks_is_fine():
    """A multi-byte character cut by a chunk boundary is whole once the line is: no error."""
    text = '{"content": "é"}'.encode()
    cut = text.index(b"\xc3") + 1
    events, _parser = parse([b"data: " + text[:cut], text[cut:] + b"\n\ndata: [DONE]\n\n"])
    assert events[0].value == {"content": "é"}


def test_line_without_end_over_the_limit(monkeypatch):
    from ansible_collections.inferlab.distributed.plugins.module_utils import _sse
    monkeypatch.setattr(_sse, "MAX_EVENT_BYTES", 64)
    parser = SSEParser()
    with pytest.raises(SSEError, match="a line of more than 64 bytes without a line end"):
        parser.feed(b"data: " + b"x" * 100, 0)
    parser = SSEParser()
    with pytest.raises(SSEError, match="an event of more than 64 bytes"):
        parser.feed(b"data: " + b"x" * 40 + b"\ndata: " + b"y" * 40 + b"\n", 0)


def test_error_message_shows_the_bytes_cut_short():
    with pytest.raises(SSEError) as caught:
        parse([b"data: " + b"z" * 1000 + b"\n\n"])
    assert "zzz" in str(caught.value) and "(800 more)" in str(caught.value)
