"""What a record keeps of a value that may hold a secret: redaction by name and by the shape of a value.

- by name (redact_vars only): the value of a mapping key that names a secret (``token``, ``secret``, ``passw``,
  ``key``), unless the name says where a secret is kept (``_file``, ``_path``, ``_dir``);
- by shape, whatever the name (redact_vars and redact_value):
  - a URL's userinfo, anywhere in a string: ``https://user:pass@host`` -> ``https://<redacted>@host``;
  - the value after a secret flag (SECRET_FLAGS, ``_`` or ``-`` alike): the next item of an argument list
    (``['--api-key', 'sk-1']``), or what follows the flag in a string (``--api-key=sk-1``, ``--api-key sk-1``,
    ``--token "a b"``).

Lists and mappings are walked at any depth; other values are kept. The shape rule is the collection's
``plugins/module_utils/_redaction.py``, which the hosts run: kept here as a copy, since a package installed with pip
cannot import the collection; tests/package/test_redaction.py holds the two equal.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"
# An extra var whose name says it holds a secret is kept out of record.json; a name that says where one is kept (a
# file, a path, a directory) is not a secret.
SECRET_VAR_RE = re.compile(r"token|secret|passw|key", re.IGNORECASE)
NOT_SECRET_VAR_SUFFIXES = ("_file", "_path", "_dir")
# Flags whose value is a secret, in the spelling with dashes (the inference servers', routers' and gateways' CLIs).
SECRET_FLAGS = ("--access-token", "--admin-api-key", "--api-key", "--auth", "--auth-token", "--client-secret",
                "--hf-token", "--master-key", "--passwd", "--password", "--secret", "--token")
# scheme://USERINFO@: the userinfo runs to the last '@' before the path, query, fragment or a space
URL_USERINFO_RE = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/?#\s]+@", re.IGNORECASE)
# a secret flag inside a string, then '=' or spaces, then its value: quoted, or up to the next space
FLAG_VALUE_RE = re.compile(
    r'(?P<flag>(?<![\w-])--(?:' + "|".join(flag[2:].replace("-", "[-_]") for flag in SECRET_FLAGS)
    + r'))(?P<sep>=|\s+)(?P<value>"[^"]*"|' + r"'[^']*'|\S+)",
    re.IGNORECASE)


def is_secret_name(key) -> bool:
    """Whether a mapping key names a secret (its whole value is redacted)."""
    return bool(SECRET_VAR_RE.search(str(key))) and not str(key).endswith(NOT_SECRET_VAR_SUFFIXES)


def is_secret_flag(arg) -> bool:
    """Whether ``arg``, an item of an argument list, is a secret flag whose value is the next item."""
    return isinstance(arg, str) and arg.lower().replace("_", "-") in SECRET_FLAGS


def redact_text(text: str) -> str:
    """``text`` with every URL's userinfo and every secret flag's value replaced by REDACTED."""
    text = URL_USERINFO_RE.sub(lambda match: match.group("scheme") + REDACTED + "@", text)
    return FLAG_VALUE_RE.sub(lambda match: match.group("flag") + match.group("sep") + REDACTED, text)


def redact_argv(items: list, redact_item=None) -> list:
    """A list with the item after each secret flag replaced by REDACTED, every other item passed through
    ``redact_item`` (default: redact_value)."""
    redact_item = redact_item or redact_value
    return [REDACTED if index and is_secret_flag(items[index - 1]) else redact_item(item)
            for index, item in enumerate(items)]


def redact_value(value):
    """``value`` with the shapes redacted at any depth, whatever the names: for what is not extra vars (a rank's
    command line), where names such as ``output_tokens`` are no secrets."""
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return redact_argv(value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_vars(value):
    """``value`` (extra vars) with the value of every key that names a secret replaced by REDACTED, and the shapes
    redacted, at any depth."""
    if isinstance(value, dict):
        return {key: REDACTED if is_secret_name(key) else redact_vars(item) for key, item in value.items()}
    if isinstance(value, list):
        return redact_argv(value, redact_vars)
    if isinstance(value, str):
        return redact_text(value)
    return value
