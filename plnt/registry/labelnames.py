"""Label keys and values as Kubernetes validates them, and Go's way of quoting text.

Selectors, field causes and error messages all print offending text the way
kube-apiserver does (Go's `%q`), and label keys and values follow
k8s.io/apimachinery's `pkg/api/validate/content` rules and messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(_NAME_FMT)
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_VALUE_FMT = f"({_NAME_FMT})?"
_VALUE_RE = re.compile(_VALUE_FMT)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_FMT = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
_DNS_SUBDOMAIN_RE = re.compile(_DNS_SUBDOMAIN_FMT)
_DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_MAX_NAME = 63
_MAX_VALUE = 63
_MAX_SUBDOMAIN = 253


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _byte_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def label_key_errors(key: str) -> list[str]:
    """Why `key` is not a valid label key (an optional DNS prefix, '/', a 63-byte name)."""
    errors: list[str] = []
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if _byte_length(prefix) > _MAX_SUBDOMAIN:
                errors.append(f"prefix part must be no more than {_MAX_SUBDOMAIN} bytes")
            if not _DNS_SUBDOMAIN_RE.fullmatch(prefix):
                errors.append(
                    "prefix part "
                    + _regex_error(_DNS_SUBDOMAIN_MSG, _DNS_SUBDOMAIN_FMT, "example.com")
                )
    if not name:
        errors.append("name part must be non-empty")
    elif _byte_length(name) > _MAX_NAME:
        errors.append(f"name part must be no more than {_MAX_NAME} bytes")
    if not _NAME_RE.fullmatch(name):
        errors.append(
            "name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why `value` is not a valid label value (empty, or a 63-byte name)."""
    errors: list[str] = []
    if _byte_length(value) > _MAX_VALUE:
        errors.append(f"must be no more than {_MAX_VALUE} bytes")
    if not _VALUE_RE.fullmatch(value):
        errors.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """Go's %q: how kube-apiserver prints names, paths and values inside messages."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def is_dns1123_subdomain(value: str) -> bool:
    """A lowercase RFC 1123 subdomain, as object names must be (at most 253 characters)."""
    return len(value) <= _MAX_SUBDOMAIN and _DNS_SUBDOMAIN_RE.fullmatch(value) is not None


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Why `value` is not a lowercase RFC 1123 subdomain (kube's IsDNS1123Subdomain texts)."""
    errors: list[str] = []
    if len(value) > _MAX_SUBDOMAIN:
        errors.append(f"must be no more than {_MAX_SUBDOMAIN} characters")
    if not _DNS_SUBDOMAIN_RE.fullmatch(value):
        errors.append(_regex_error(_DNS_SUBDOMAIN_MSG, _DNS_SUBDOMAIN_FMT, "example.com"))
    return errors


_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_MAX_LABEL = 63


def dns1123_label_errors(value: str) -> list[str]:
    """Why `value` is not a lowercase RFC 1123 label (kube's IsDNS1123Label texts)."""
    errors: list[str] = []
    if _byte_length(value) > _MAX_LABEL:
        errors.append(f"must be no more than {_MAX_LABEL} characters")
    if not _DNS_LABEL_RE.fullmatch(value):
        if _DNS_SUBDOMAIN_RE.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(_regex_error(_DNS_LABEL_MSG, _DNS_LABEL, "my-name", "123-abc"))
    return errors


_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)
_CONFIG_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"


def config_key_errors(key: str) -> list[str]:
    """Why `key` is not a valid Secret or ConfigMap key (kube's IsConfigMapKey texts)."""
    errors: list[str] = []
    if len(key) > _MAX_SUBDOMAIN:
        errors.append(f"must be no more than {_MAX_SUBDOMAIN} characters")
    if not _CONFIG_KEY_RE.fullmatch(key):
        errors.append(
            _regex_error(_CONFIG_KEY_MSG, _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name")
        )
    if key == ".":
        errors.append("must not be '.'")
    elif key == "..":
        errors.append("must not be '..'")
    elif key.startswith(".."):
        errors.append("must not start with '..'")
    return errors


def quoted_list(values: Iterable[str]) -> str:
    """`["a","b"]`: Go's quoting of a string slice in messages."""
    return "[" + ",".join(go_quote(value) for value in values) + "]"


def go_json_type(value: Any) -> str:
    """How Go's encoding/json names a JSON value's type in its unmarshal errors, which kube
    passes on verbatim (metadata, TypeMeta and DeleteOptions decoding all quote it)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
