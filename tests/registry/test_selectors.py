"""Label and field selectors behave as k8s.io/apimachinery parses and matches them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.api import meta
from plnt.registry import fieldselectors, selectors
from plnt.registry.fieldselectors import FieldRequirement
from plnt.registry.selectors import (
    LabelRequirement,
    LabelSelector,
    SelectorError,
)

EVENT_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
}


def test_every_operator_of_the_grammar_parses_into_requirements_sorted_by_key() -> None:
    parsed = selectors.parse_label_selector("i>1,a=b,c!=d,e in (y,x),f notin (z),g,!h,j==k,l<5")
    assert [(r.key, r.operator, r.values) for r in parsed.requirements] == [
        ("a", "=", ("b",)),
        ("c", "!=", ("d",)),
        ("e", "in", ("x", "y")),
        ("f", "notin", ("z",)),
        ("g", "exists", ()),
        ("h", "!", ()),
        ("i", "gt", ("1",)),
        ("j", "==", ("k",)),
        ("l", "lt", ("5",)),
    ]
    assert str(parsed) == "a=b,c!=d,e in (x,y),f notin (z),g,!h,i>1,j==k,l<5"


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("env=prod", {"env": "prod"}, True),
        ("env=prod", {}, False),
        ("env!=prod", {}, True),
        ("env notin (a,b)", {"env": "a"}, False),
        ("env notin (a,b)", {}, True),
        ("env", {"env": ""}, True),
        ("!env", {"env": ""}, False),
        ("a=", {"a": ""}, True),
        ("a in ()", {"a": ""}, True),
        ("n>5", {"n": "6"}, True),
        ("n>5", {"n": "x"}, False),
        ("n<5", {}, False),
        ("n<1", {"n": "-2"}, True),
        ("in in (in)", {"in": "in"}, True),
        ("", {"anything": "x"}, True),
    ],
)
def test_label_selectors_match_as_kube_matches_them(
    text: str, labels: dict[str, str], expected: bool
) -> None:
    assert selectors.parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a b", "found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b,", "found '', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("=", "found '=', expected: !, identifier, or 'end of string'"),
        ("a in (b", "found '', expected: ',' or ')'"),
        ("a in b", "found 'b' expected: '('"),
        ("a=!b", "found '!', expected: identifier"),
        ("x>b", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("x>-1", 'values[0][x]: Invalid value: "-1": a valid label must be'),
        ("a/b/c", "a valid label key must consist of alphanumeric characters"),
        ("Example.com/a", "prefix part a lowercase RFC 1123 subdomain"),
        ("a=" + "v" * 64, 'values[0][a]: Invalid value: "' + "v" * 64),
        ("a=" + "v" * 64, "must be no more than 63 bytes"),
        ("k" * 64, "name part must be no more than 63 bytes"),
        ("a=-x", "a valid label must be an empty string or consist of alphanumeric"),
    ],
)
def test_invalid_label_selectors_are_refused_naming_the_text_and_kubes_reason(
    text: str, reason: str
) -> None:
    with pytest.raises(SelectorError) as caught:
        selectors.parse_label_selector(text)
    assert f'invalid label selector "{text}"' in str(caught.value)
    assert reason in str(caught.value)


def test_a_model_selector_is_match_labels_and_match_expressions_anded() -> None:
    model = meta.LabelSelector.model_validate(
        {
            "matchLabels": {"pool": "gpu"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                {"key": "draining", "operator": "DoesNotExist"},
            ],
        }
    )
    selector = selectors.label_selector_from_model(model)
    assert selector.matches({"pool": "gpu", "zone": "b"})
    assert not selector.matches({"pool": "gpu", "zone": "b", "draining": "yes"})
    assert not selector.matches({"pool": "cpu", "zone": "a"})
    assert selectors.label_selector_from_model(meta.LabelSelector()).empty()


def test_a_model_selector_with_in_and_no_values_is_refused() -> None:
    model = meta.LabelSelector.model_validate(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]}
    )
    with pytest.raises(SelectorError, match="values set can't be empty"):
        selectors.label_selector_from_model(model)


def test_describes_escaped_field_selector_finds_the_event_in_any_term_order() -> None:
    text = r"involvedObject.uid=u1,involvedObject.name=a\,b\=c\\d,involvedObject.kind=WorkflowRun"
    parsed = fieldselectors.parse_field_selector(text, allowed=EVENT_FIELDS)
    fields = {
        "involvedObject.kind": "WorkflowRun",
        "involvedObject.name": "a,b=c\\d",
        "involvedObject.uid": "u1",
    }
    assert parsed.matches(fields)
    assert not parsed.matches({**fields, "involvedObject.uid": "u2"})
    assert str(parsed).count("\\,") == 1


def test_an_unsupported_field_gets_kubes_exact_message() -> None:
    with pytest.raises(SelectorError) as caught:
        fieldselectors.parse_field_selector("spec.replicas=1", allowed=EVENT_FIELDS)
    assert str(caught.value) == "field label not supported: spec.replicas"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        (r"metadata.name=a\q", "invalid escape sequence: \\q"),
        ("metadata.name=a\\", "invalid escape sequence: \\"),
        ("metadata.name=a=b", "unescaped character in value: '='"),
    ],
)
def test_malformed_field_selectors_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(SelectorError) as caught:
        fieldselectors.parse_field_selector(text, allowed=EVENT_FIELDS)
    assert reason in str(caught.value)


def test_a_metadata_name_term_names_the_single_object_unless_it_cannot_be_a_path_segment() -> None:
    def name(text: str) -> str | None:
        return fieldselectors.parse_field_selector(text, allowed=EVENT_FIELDS).single_name()

    assert name("metadata.name=x") == "x"
    assert name("metadata.namespace=ns,metadata.name==x") == "x"
    assert name("metadata.name!=x") is None
    assert name("metadata.name=a/b") is None
    assert name("") is None


def test_a_missing_field_compares_as_the_empty_string() -> None:
    parsed = fieldselectors.parse_field_selector(
        "metadata.name=,metadata.namespace!=", allowed=EVENT_FIELDS
    )
    assert [r.value for r in parsed.requirements] == ["", ""]
    assert parsed.matches({"metadata.namespace": "ns"})
    assert not parsed.matches({})


# --- properties ---------------------------------------------------------------------------

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_names = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
_prefixes = st.from_regex(
    r"[a-z0-9]([-a-z0-9]{0,5}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}", fullmatch=True
)
_keys = st.one_of(_names, st.builds(lambda p, n: f"{p}/{n}", _prefixes, _names))
_values = st.one_of(st.just(""), _names)
_integers = st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str)
_bounds = st.integers(min_value=0, max_value=2**63 - 1).map(str)  # "-1" is no label value


@st.composite
def _requirements(draw: st.DrawFn) -> LabelRequirement:
    key = draw(_keys)
    operator = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"]))
    if operator in ("in", "notin"):
        values = tuple(draw(st.lists(_values, min_size=1, max_size=4)))
    elif operator in ("exists", "!"):
        values = ()
    elif operator in ("gt", "lt"):
        values = (draw(_bounds),)
    else:
        values = (draw(_values),)
    return LabelRequirement(key, operator, values)


_label_sets = st.dictionaries(_keys, st.one_of(_values, _integers), max_size=6)


def _reference(requirement: LabelRequirement, labels: dict[str, str]) -> bool:
    """A direct reading of the documented semantics, written independently of the code."""
    op, key, values = requirement.operator, requirement.key, set(requirement.values)
    if op in ("=", "==", "in"):
        return key in labels and labels[key] in values
    if op in ("!=", "notin"):
        return labels.get(key) not in values or key not in labels
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    try:
        have, bound = int(labels[key]), int(requirement.values[0])
    except (KeyError, ValueError):
        return False
    if not -(2**63) <= have < 2**63 or labels[key].strip() != labels[key] or "_" in labels[key]:
        return False
    return have > bound if op == "gt" else have < bound


@given(st.lists(_requirements(), max_size=5))
def test_a_rendered_selector_parses_back_to_the_same_requirements(
    requirements: list[LabelRequirement],
) -> None:
    selector = LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))
    parsed = selectors.parse_label_selector(str(selector))
    assert sorted(parsed.requirements, key=repr) == sorted(selector.requirements, key=repr)


@given(st.lists(_requirements(), max_size=4), _label_sets, st.data())
def test_matching_agrees_with_a_reference_evaluation(
    requirements: list[LabelRequirement], labels: dict[str, str], data: st.DataObject
) -> None:
    # Give many requirement keys a label, often one of the requirement's own values.
    for requirement in requirements:
        choices = [*requirement.values, "0", "7", "x"]
        if data.draw(st.booleans()):
            labels[requirement.key] = data.draw(st.sampled_from(choices))
    selector = selectors.parse_label_selector(",".join(str(r) for r in requirements))
    expected = all(_reference(r, labels) for r in requirements)
    assert selector.matches(labels) is expected


@given(st.text(alphabet=st.sampled_from(_ALNUM[:6] + " =!(),<>\\/._-\t\0é"), max_size=30))
def test_garbage_label_selectors_parse_or_fail_only_with_selector_error(text: str) -> None:
    try:
        selectors.parse_label_selector(text)
    except SelectorError as error:
        assert str(error)


@given(st.text(max_size=40))
def test_garbage_field_selectors_parse_or_fail_only_with_selector_error(text: str) -> None:
    try:
        parsed = fieldselectors.parse_field_selector(text, allowed=EVENT_FIELDS)
    except SelectorError as error:
        assert str(error)
    else:
        assert all(r.field in EVENT_FIELDS for r in parsed.requirements)


@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(EVENT_FIELDS)), st.sampled_from(["=", "!="]), st.text()),
        max_size=4,
    )
)
def test_field_values_with_any_characters_survive_escaping(
    terms: list[tuple[str, str, str]],
) -> None:
    requirements = [FieldRequirement(f, op, v) for f, op, v in terms]
    text = ",".join(str(r) for r in requirements)
    parsed = fieldselectors.parse_field_selector(text, allowed=EVENT_FIELDS)
    assert sorted(parsed.requirements, key=repr) == sorted(requirements, key=repr)
