"""Label selectors (and the selector error type), parsed and matched exactly as
k8s.io/apimachinery does; field selectors are in `fieldselectors`.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from plnt.api import meta
from plnt.registry.labelnames import go_quote, label_key_errors, label_value_errors, quoted_list

__all__ = [
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "label_selector_from_model",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A label or field selector that cannot be parsed or uses something unsupported."""


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
    shown = quoted_list(values)
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
