"""plugin_utils/_run_fragment.py: the path, the bytes and the atomic write behind the fragment action."""

import json
import os

import pytest

from ansible_collections.inferlab.distributed.plugins.plugin_utils._run_fragment import (
    FragmentError,
    fragment_path,
    fragment_text,
    write_fragment,
)


def test_writes_nice_json_atomically(tmp_path):
    path = write_fragment(str(tmp_path), "fragments/verify", "lab-a", {"b": 1, "a": [1, {"c": None}]})
    assert path == str(tmp_path / "fragments" / "verify" / "lab-a.json")
    text = (tmp_path / "fragments" / "verify" / "lab-a.json").read_text()
    assert text == '{\n    "a": [\n        1,\n        {\n            "c": null\n        }\n    ],\n    "b": 1\n}\n'
    assert json.loads(text) == {"a": [1, {"c": None}], "b": 1}
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(tmp_path / "fragments" / "verify")) == ["lab-a.json"]  # no temporary file left


def test_rewrites_a_fragment_in_place(tmp_path):
    write_fragment(str(tmp_path), "known_good", "lab-a", {"v": 1})
    write_fragment(str(tmp_path), "known_good", "lab-a", {"v": 2})
    assert json.loads((tmp_path / "known_good" / "lab-a.json").read_text()) == {"v": 2}


@pytest.mark.parametrize("fragment_dir", ["", "/etc", "../x", "fragments/../..", "a//b", "a/./b", "a b", None])
def test_refuses_a_dir_outside_the_run_directory(tmp_path, fragment_dir):
    with pytest.raises(FragmentError, match="dir must be a directory inside the run directory"):
        fragment_path(str(tmp_path), fragment_dir, "lab-a")


@pytest.mark.parametrize("name", ["", "..", "a/b", "a b", None])
def test_refuses_a_bad_name(tmp_path, name):
    with pytest.raises(FragmentError, match="name must be a file name"):
        fragment_path(str(tmp_path), "fragments", name)


def test_refuses_no_run_directory():
    with pytest.raises(FragmentError, match=r"inferlab_run_dir, found nothing.*-e inferlab_run_dir=DIR"):
        fragment_path("", "fragments", "lab-a")


@pytest.mark.parametrize("content", [[1], "text", None])
def test_refuses_content_that_is_not_an_object(content):
    with pytest.raises(FragmentError, match="content must be a JSON object"):
        fragment_text(content)


def test_a_failed_write_leaves_the_old_fragment_and_no_temporary(tmp_path):
    write_fragment(str(tmp_path), "fragments", "x", {"v": 1})
    with pytest.raises(TypeError):
        write_fragment(str(tmp_path), "fragments", "x", {"v": object()})
    assert json.loads((tmp_path / "fragments" / "x.json").read_text()) == {"v": 1}
    assert os.listdir(tmp_path / "fragments") == ["x.json"]
