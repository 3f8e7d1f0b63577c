# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Redaction by the shape of a value, whatever its name: what a result or a record keeps of a command line or a
string that may carry a secret.

- a URL's userinfo, anywhere in a string: ``https://user:pass@host`` -> ``https://<redacted>@host``;
- the value after a secret flag (SECRET_FLAGS, ``_`` or ``-`` alike): the next item of an argument list
  (``['--api-key', 'sk-1']``), or what follows the flag in a string (``--api-key=sk-1``, ``--api-key sk-1``,
  ``--token "a b"``).

Lists and mappings are walked at any depth; other values are kept. A flag that names where a secret is kept
(``--api-key-file``) is not a secret flag.

Standard library only, free of any ``ansible`` import, and compiles on Python 3.8: it may run on managed hosts. The
``inferlab`` package keeps the same rule in ``src/inferlab/record/redaction.py`` (a package installed with pip cannot
import the collection); ``tests/package/test_redaction.py`` holds the two equal.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

REDACTED = '<redacted>'
# Flags whose value is a secret, in the spelling with dashes (the inference servers', routers' and gateways' CLIs).
SECRET_FLAGS = ('--access-token', '--admin-api-key', '--api-key', '--auth', '--auth-token', '--client-secret',
                '--hf-token', '--master-key', '--passwd', '--password', '--secret', '--token')
# scheme://USERINFO@: the userinfo runs to the last '@' before the path, query, fragment or a space
URL_USERINFO_RE = re.compile(r'(?P<scheme>[a-z][a-z0-9+.-]*://)[^/?#\s]+@', re.IGNORECASE)
# a secret flag inside a string, then '=' or spaces, then its value: quoted, or up to the next space
FLAG_VALUE_RE = re.compile(
    r'(?P<flag>(?<![\w-])--(?:' + '|'.join(flag[2:].replace('-', '[-_]') for flag in SECRET_FLAGS)
    + r'))(?P<sep>=|\s+)(?P<value>"[^"]*"|' + r"'[^']*'|\S+)",
    re.IGNORECASE)


def is_secret_flag(arg):
    """Whether ``arg``, an item of an argument list, is a secret flag whose value is the next item."""
    return isinstance(arg, str) and arg.lower().replace('_', '-') in SECRET_FLAGS


def redact_text(text):
    """``text`` with every URL's userinfo and every secret flag's value replaced by REDACTED."""
    text = URL_USERINFO_RE.sub(lambda match: match.group('scheme') + REDACTED + '@', text)
    return FLAG_VALUE_RE.sub(lambda match: match.group('flag') + match.group('sep') + REDACTED, text)


def redact_argv(items, redact_item=None):
    """A list with the item after each secret flag replaced by REDACTED, every other item passed through
    ``redact_item`` (default: redact_value)."""
    redact_item = redact_item or redact_value
    return [REDACTED if index and is_secret_flag(items[index - 1]) else redact_item(item)
            for index, item in enumerate(items)]


def redact_value(value):
    """``value`` with the shapes above redacted at any depth: strings, lists and the values of mappings."""
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return redact_argv(value)
    if isinstance(value, str):
        return redact_text(value)
    return value
