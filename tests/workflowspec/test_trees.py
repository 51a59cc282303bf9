"""A spec's tree of pinned sub-workflows, pulled through the spec cache from a real OCI
layout: the bundle, the depth limit, a cycle, and errors that name the calling step."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.sagas.speccache import SpecCache
from plnt.workflowspec import bundles, documents, sources, trees
from plnt.workflowspec import errors as spec_errors
from tests.support.subworkflows import caller, child, digest_of


async def publish(layout: Path, tag: str, text: str) -> str:
    """Publish `text` under `tag` in the layout; its tag reference."""
    ref = f"oci-layout:{layout}:{tag}"
    await sources.publish(text.encode(), ref)
    return ref


async def test_the_bundle_holds_every_called_spec_down_the_tree(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    leaf = child()
    middle = caller(await publish(layout, "leaf", leaf), digest_of(leaf), name="middle")
    top = caller(await publish(layout, "middle", middle), digest_of(middle), name="top")
    cache = SpecCache(tmp_path / "cache")
    packed = await cache.bundle(top.encode(), digest=digest_of(top))
    bundle = bundles.unpack(packed)
    assert (bundle.spec, bundle.digest) == (top.encode(), digest_of(top))
    assert bundle.workflows == {digest_of(middle): middle.encode(), digest_of(leaf): leaf.encode()}


async def test_a_tree_deeper_than_the_limit_is_refused_naming_the_path(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    text = child()
    for level in range(trees.MAX_DEPTH + 1):
        ref = await publish(layout, f"level{level}", text)
        text = caller(ref, digest_of(text), name=f"level{level + 1}")
    with pytest.raises(documents.SpecError) as refused:
        await SpecCache(tmp_path / "cache").bundle(text.encode(), digest=digest_of(text))
    path = " → ".join(["steps[1](id=call)"] * (trees.MAX_DEPTH + 1))
    assert f"{path}.digest: calls a workflow {trees.MAX_DEPTH + 1} levels down; at most" in str(
        refused.value
    )


async def test_a_tree_at_the_limit_is_bundled(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    text = child()
    for level in range(trees.MAX_DEPTH):
        ref = await publish(layout, f"level{level}", text)
        text = caller(ref, digest_of(text), name=f"level{level + 1}")
    packed = await SpecCache(tmp_path / "cache").bundle(text.encode(), digest=digest_of(text))
    assert len(bundles.unpack(packed).workflows) == trees.MAX_DEPTH


async def test_a_cycle_is_refused_naming_the_step_that_closes_it() -> None:
    # sha256 makes a real cycle all but impossible to build; a fetcher that does not hold
    # bytes to their digests (as the spec cache does) could serve one, and is refused.
    one, two = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    texts = {one: caller("oci-layout:lib:two", two, name="one")}
    texts[two] = caller("oci-layout:lib:one", one, name="two")

    async def fetch(ref: str, digest: str) -> bytes:
        return texts[digest].encode()

    with pytest.raises(documents.SpecError) as refused:
        await trees.resolve(documents.parse_workflow(texts[one].encode()), fetch=fetch, digest=one)
    assert f"steps[1](id=call) → steps[1](id=call).digest: {one} calls itself (a cycle)" in str(
        refused.value
    )


async def test_a_digest_mismatch_below_the_top_names_the_calling_step(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    ref = await publish(layout, "leaf", child())
    wrong = digest_of(child("2.0.0"))
    top = caller(ref, wrong)
    with pytest.raises(spec_errors.DigestMismatch) as refused:
        await SpecCache(tmp_path / "cache").bundle(top.encode(), digest=digest_of(top))
    message = str(refused.value)
    assert message.startswith("steps[1](id=call): digest mismatch")
    assert wrong in message and digest_of(child()) in message


async def test_an_invalid_called_spec_is_refused_with_its_problems_under_the_step(
    tmp_path: Path,
) -> None:
    broken = child().replace("kind: transform", "kind: transfrom")
    ref = await publish(tmp_path / "layout", "broken", broken)
    top = caller(ref, digest_of(broken))
    with pytest.raises(documents.SpecError) as refused:
        await SpecCache(tmp_path / "cache").bundle(top.encode(), digest=digest_of(top))
    assert f"steps[1](id=call) ({digest_of(broken)}) steps[1]" in str(refused.value)


def test_a_step_whose_ref_is_pinned_elsewhere_is_a_spec_error_naming_the_field() -> None:
    digest = digest_of(child())
    other = digest_of(child("3.0.0"))
    text = caller(f"oci-layout:lib:shout@{other}", digest)
    with pytest.raises(documents.SpecError) as refused:
        documents.parse_workflow(text.encode())
    assert f"steps[1](id=call).ref: pinned to {other}, but the step's digest is {digest}" in str(
        refused.value
    )
    with pytest.raises(documents.SpecError) as refused:
        documents.parse_workflow(caller("http://nowhere/x", digest).encode())
    assert "steps[1](id=call).ref: unknown reference 'http://nowhere/x'" in str(refused.value)
    with pytest.raises(documents.SpecError) as refused:
        documents.parse_workflow(caller("oci-layout:lib:x", "sha256:abc").encode())
    assert "steps[1](id=call).digest" in str(refused.value)
