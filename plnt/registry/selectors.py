"""Label and field selectors, parsed and matched exactly as k8s.io/apimachinery does.

kubectl, client-go informers and controllers send `labelSelector` and
`fieldSelector` query parameters written for kube-apiserver; a look-alike parser
would accept or refuse different strings and silently change which objects a
`kubectl get -l ...` or `kubectl describe` sees. So the grammar, the validation
of label keys and values, the ordering of requirements and the matching rules
follow `pkg/labels/selector.go` and `pkg/fields/selector.go` (including their
corner cases: `a in ()` selects the empty value, `a=` means "a is empty",
field values escape `\\`, `,` and `=` with a backslash, and a missing field
compares equal to the empty string).

Errors: every failure is a `SelectorError` (a `ValueError`) whose message names
the offending selector text and the reason in kube's words; the one message
clients match on, ``field label not supported: <field>``, is reproduced exactly.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from plnt.api import meta

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "escape_field_value",
    "go_quote",
    "label_key_errors",
    "label_selector_from_model",
    "label_value_errors",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A label or field selector that cannot be parsed or uses something unsupported."""


# --- label keys and values (k8s.io/apimachinery/pkg/api/validate/content) -------------

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


def go_quote(text: str) -> str:
    """Go's %q for the strings that appear in selector errors."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif not char.isprintable():
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _json_list(values: Iterable[str]) -> str:
    return "[" + ",".join(go_quote(value) for value in values) + "]"


# --- label requirements and selectors ---------------------------------------------------

EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"
OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_ALL_OPERATORS = (*OPERATORS, EXISTS, DOES_NOT_EXIST)

_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign, ASCII digits, int64 range."""
    if not _GO_INT.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


@dataclass(frozen=True)
class LabelRequirement:
    """One term of a label selector; `operator` uses apimachinery's selection.Operator text."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        values = tuple(self.values)
        if self.operator in (IN, NOT_IN):
            values = tuple(sorted(set(values)))  # a set, as kube keeps it
        object.__setattr__(self, "values", values)
        problems = _requirement_errors(self.key, self.operator, values)
        if problems:
            raise SelectorError(_aggregate(problems))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the labels satisfy this term (Requirement.Matches)."""
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if not present or len(self.values) != 1:
            return False
        have, bound = _parse_go_int64(labels[self.key]), _parse_go_int64(self.values[0])
        if have is None or bound is None:
            return False
        return have > bound if self.operator == GREATER_THAN else have < bound

    def __str__(self) -> str:
        head = ("!" if self.operator == DOES_NOT_EXIST else "") + self.key
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return head
        joined = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if self.operator in (IN, NOT_IN):
            return f"{head} {self.operator} ({joined})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(self.operator, self.operator)
        return f"{head}{symbol}{joined}"


def _requirement_errors(key: str, operator: str, values: tuple[str, ...]) -> list[str]:
    """labels.NewRequirement's checks, as field-error strings."""
    errors: list[str] = []
    if key_errors := label_key_errors(key):
        errors.append(f"key: Invalid value: {go_quote(key)}: {'; '.join(key_errors)}")
    shown = _json_list(values)
    if operator in (IN, NOT_IN):
        if not values:
            detail = "for 'in', 'notin' operators, values set can't be empty"
            errors.append(f"values: Invalid value: {shown}: {detail}")
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(values) != 1:
            detail = "exact-match compatibility requires one single value"
            errors.append(f"values: Invalid value: {shown}: {detail}")
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            detail = "values set must be empty for exists and does not exist"
            errors.append(f"values: Invalid value: {shown}: {detail}")
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            detail = "for 'Gt', 'Lt' operators, exactly one value is required"
            errors.append(f"values: Invalid value: {shown}: {detail}")
        for index, value in enumerate(values):
            if _parse_go_int64(value) is None:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                errors.append(f"values[{index}]: Invalid value: {go_quote(value)}: {detail}")
    else:
        supported = ", ".join(go_quote(op) for op in _ALL_OPERATORS)
        errors.append(
            f"operator: Unsupported value: {go_quote(operator)}: supported values: {supported}"
        )
    for index, value in enumerate(values):
        if value_errors := label_value_errors(value):
            errors.append(
                f"values[{index}][{key}]: Invalid value: {go_quote(value)}: "
                + "; ".join(value_errors)
            )
    return errors


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message bare, several in brackets, deduplicated."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; no requirements selects everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every requirement holds for `labels`."""
        return all(requirement.matches(labels) for requirement in self.requirements)

    def empty(self) -> bool:
        """True when the selector selects everything (kube's labels.Everything())."""
        return not self.requirements

    def requires_exact_match(self, key: str) -> str | None:
        """The value every match must have for `key`, when one `=`, `==` or `in (v)` pins it."""
        for requirement in self.requirements:
            pinned = requirement.operator in (EQUALS, DOUBLE_EQUALS, IN)
            if requirement.key == key and pinned and len(requirement.values) == 1:
                return requirement.values[0]
        return None

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def _sorted_by_key(requirements: Iterable[LabelRequirement]) -> tuple[LabelRequirement, ...]:
    return tuple(sorted(requirements, key=lambda requirement: requirement.key))


# The lexer works on characters; apimachinery's works on bytes, which only differs for bytes
# that are not ASCII, and those are never special symbols or whitespace there either.
_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_SYMBOLS = {")", ",", "!", "==", "=", ">", "<", "!=", "("}
_KEYWORDS = {"in", "notin"}
_END = ""  # token kind of the end of the input


@dataclass(frozen=True)
class _Token:
    kind: str  # "ident", "end", a keyword or a symbol
    text: str


class _Lexer:
    """A port of apimachinery's byte lexer: `read` yields NUL at the end of input."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._position = 0

    def _read(self) -> str:
        if self._position < len(self._text):
            self._position += 1
            return self._text[self._position - 1]
        return "\0"

    def _unread(self) -> None:
        self._position -= 1

    def tokens(self) -> list[_Token]:
        found: list[_Token] = []
        while True:
            token = self._lex()
            found.append(token)
            if token.kind == _END:
                return found

    def _lex(self) -> _Token:
        char = self._read()
        while char in _WHITESPACE:
            char = self._read()
        # A NUL byte reads as the end of input there too; keep that behaviour.
        if char == "\0":
            return _Token(_END, "")
        self._unread()
        return self._symbol() if char in _SPECIAL else self._word()

    def _symbol(self) -> _Token:
        buffer, best = "", ""
        while True:
            char = self._read()
            if char == "\0":
                break
            if char not in _SPECIAL:
                self._unread()
                break
            buffer += char
            if buffer in _SYMBOLS:
                best = buffer
            elif best:
                self._unread()
                break
        if not best:
            raise SelectorError(f"error expected: keyword found '{buffer}'")
        return _Token(best, best)

    def _word(self) -> _Token:
        buffer = []
        while True:
            char = self._read()
            if char == "\0":
                break
            if char in _SPECIAL or char in _WHITESPACE:
                self._unread()
                break
            buffer.append(char)
        word = "".join(buffer)
        return _Token(word if word in _KEYWORDS else "ident", word)


class _LabelParser:
    """A recursive-descent parser with apimachinery's grammar and error texts."""

    def __init__(self, tokens: list[_Token]) -> None:
        self._tokens = tokens
        self._position = 0

    def _peek(self, *, values: bool = True) -> _Token:
        token = self._tokens[self._position]
        # In a value context the keywords are ordinary identifiers (`in in (in)` is legal).
        if values and token.kind in _KEYWORDS:
            return _Token("ident", token.text)
        return token

    def _take(self, *, values: bool = True) -> _Token:
        token = self._peek(values=values)
        if self._position < len(self._tokens) - 1:
            self._position += 1
        return token

    def parse(self) -> list[LabelRequirement]:
        requirements: list[LabelRequirement] = []
        while True:
            token = self._peek()
            if token.kind == _END:
                return requirements
            if token.kind not in ("ident", "!"):
                raise SelectorError(
                    f"found '{token.text}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._requirement())
            except SelectorError as error:
                raise SelectorError(f"unable to parse requirement: {error}") from None
            token = self._take()
            if token.kind == _END:
                return requirements
            if token.kind != ",":
                raise SelectorError(f"found '{token.text}', expected: ',' or 'end of string'")
            following = self._peek()
            if following.kind not in ("ident", "!"):
                raise SelectorError(f"found '{following.text}', expected: identifier after ','")

    def _requirement(self) -> LabelRequirement:
        operator = ""
        token = self._take()
        if token.kind == "!":
            operator = DOES_NOT_EXIST
            token = self._take()
        if token.kind != "ident":
            raise SelectorError(f"found '{token.text}', expected: identifier")
        key = token.text
        if key_errors := label_key_errors(key):
            raise SelectorError(f"key: Invalid value: {go_quote(key)}: {'; '.join(key_errors)}")
        if self._peek().kind in (_END, ","):
            operator = operator or EXISTS
        if operator in (EXISTS, DOES_NOT_EXIST):
            return _requirement(key, operator, ())
        operator_token = self._take(values=False)
        operator = {
            "in": IN,
            "notin": NOT_IN,
            "=": EQUALS,
            "==": DOUBLE_EQUALS,
            "!=": NOT_EQUALS,
            ">": GREATER_THAN,
            "<": LESS_THAN,
        }.get(operator_token.kind, "")
        if not operator:
            raise SelectorError(f"found '{operator_token.text}', expected: {', '.join(OPERATORS)}")
        values = self._set_values() if operator in (IN, NOT_IN) else self._exact_value()
        return _requirement(key, operator, tuple(sorted(values)))

    def _exact_value(self) -> set[str]:
        if self._peek().kind in (_END, ","):
            return {""}
        token = self._take()
        if token.kind != "ident":
            raise SelectorError(f"found '{token.text}', expected: identifier")
        return {token.text}

    def _set_values(self) -> set[str]:
        token = self._take()
        if token.kind != "(":
            raise SelectorError(f"found '{token.text}' expected: '('")
        following = self._peek()
        if following.kind == ")":
            self._take()
            return {""}
        if following.kind not in ("ident", ","):
            raise SelectorError(f"found '{following.text}', expected: ',', ')' or identifier")
        values = self._identifiers()
        if self._take().kind != ")":
            raise SelectorError(f"found '{following.text}', expected: ')'")
        return values

    def _identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            token = self._take()
            if token.kind == "ident":
                values.add(token.text)
                following = self._peek()
                if following.kind == ")":
                    return values
                if following.kind != ",":
                    raise SelectorError(f"found '{following.text}', expected: ',' or ')'")
            elif token.kind == ",":
                if not values:
                    values.add("")  # "(,"
                following = self._peek()
                if following.kind == ")":
                    values.add("")  # ",)"
                    return values
                if following.kind == ",":
                    self._take()
                    values.add("")  # ",,"
            else:
                raise SelectorError(f"found '{token.text}', expected: ',', or identifier")


def _requirement(key: str, operator: str, values: tuple[str, ...]) -> LabelRequirement:
    return LabelRequirement(key=key, operator=operator, values=values)


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a `labelSelector` query value such as ``a=b,c!=d,e in (x,y),!f,g>1``."""
    try:
        requirements = _LabelParser(_Lexer(text).tokens()).parse()
    except SelectorError as error:
        raise SelectorError(f"invalid label selector {go_quote(text)}: {error}") from None
    return LabelSelector(_sorted_by_key(requirements))


_MODEL_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_model(selector: meta.LabelSelector) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: matchLabels and matchExpressions, ANDed.

    An empty selector selects everything. kube reads a *missing* selector as "nothing";
    callers holding `None` decide that themselves, this function needs a selector.
    """
    requirements: list[LabelRequirement] = []
    try:
        for key, value in (selector.match_labels or {}).items():
            requirements.append(_requirement(key, EQUALS, (value,)))
        for expression in selector.match_expressions or ():
            operator = _MODEL_OPERATORS.get(expression.operator)
            if operator is None:
                raise SelectorError(
                    f"{go_quote(expression.operator)} is not a valid label selector operator"
                )
            requirement_values = tuple(expression.values or ())
            requirements.append(_requirement(expression.key, operator, requirement_values))
    except SelectorError as error:
        raise SelectorError(f"invalid label selector: {error}") from None
    return LabelSelector(_sorted_by_key(requirements))


# --- field selectors ----------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    """One `field=value` or `field!=value` term (`==` is stored as `=`)."""

    field: str
    operator: str
    value: str

    def __post_init__(self) -> None:
        if self.operator not in ("=", "!="):
            raise SelectorError(
                f"invalid field requirement operator {go_quote(self.operator)}: "
                'supported values: "=", "!="'
            )

    def matches(self, fields: Mapping[str, str]) -> bool:
        """kube's hasTerm/notHasTerm: a missing field compares as the empty string."""
        equal = fields.get(self.field, "") == self.value
        return equal if self.operator == "=" else not equal

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements; no requirements selects everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether every requirement holds for `fields`."""
        return all(requirement.matches(fields) for requirement in self.requirements)

    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def requires_exact_match(self, field: str) -> str | None:
        """The value of the first `field=` term (fields.Selector.RequiresExactMatch)."""
        for requirement in self.requirements:
            if requirement.field == field and requirement.operator == "=":
                return requirement.value
        return None

    def single_name(self) -> str | None:
        """The object name a `metadata.name=` term pins, as kube's request info derives it.

        kube-apiserver uses it as the name in authorization and watches of one object
        (`kubectl get x -w`); like `path.IsValidPathSegmentName` it ignores names that
        could not be a URL path segment.
        """
        name = self.requires_exact_match("metadata.name")
        if name is None or name in (".", "..") or "/" in name or "%" in name:
            return None
        return name

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash-escape `\\`, `,` and `=`."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(text: str) -> list[str]:
    """Split on commas not preceded by an escaping backslash; escapes stay in the terms."""
    terms: list[str] = []
    start, escaped = 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """Split at the first operator; the field name admits no escapes."""
    for index in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _unescape(selector: str, value: str) -> str:
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(
                    f"invalid field selector {go_quote(selector)}: "
                    f"invalid escape sequence: \\{char}"
                )
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(
                f"invalid field selector {go_quote(selector)}: "
                f"unescaped character in value: {char!r}"
            )
        else:
            out.append(char)
    if escaped:
        raise SelectorError(
            f"invalid field selector {go_quote(selector)}: invalid escape sequence: \\"
        )
    return "".join(out)


def parse_field_selector(text: str, *, allowed: Collection[str]) -> FieldSelector:
    """Parse a `fieldSelector` query value, refusing fields outside `allowed`.

    As in apimachinery the terms are sorted, empty terms are skipped, `==` means `=`,
    and the field check runs after the whole text has parsed.
    """
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(text)) if text else []:
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, raw = split
        value = _unescape(text, raw)
        requirements.append(FieldRequirement(field, "!=" if operator == "!=" else "=", value))
    for requirement in requirements:
        if requirement.field not in allowed:
            raise SelectorError(f"field label not supported: {requirement.field}")
    return FieldSelector(tuple(requirements))
