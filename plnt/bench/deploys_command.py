"""`python -m plnt.bench deploys`: apply → Ready against any plnt, for any target.

    python -m plnt.bench deploys --kubeconfig K --namespace N \\
        --ref oci://… --digest sha256:… --target kubernetes --deploys 10

Where `saga` starts its own standalone stack, this one drives a plnt that already runs
(standalone, or aggregated in a cluster, reached through kube-apiserver with the
kubeconfig's user): it creates `--deploys` WorkflowRuns one after another, times each
from the create request to Ready for its generation (a watch), deletes it and waits
until it is gone, and prints p50, p90 and max. The spec must already be published.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from plnt.bench import apiserver as harness
from plnt.bench import deploys
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m plnt.bench deploys", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, default=None, help="default: as kubectl")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--ref", required=True, help="the published spec's reference")
    parser.add_argument("--digest", required=True, help="its sha256 digest")
    parser.add_argument("--target", choices=("local", "kubernetes"), default="local")
    parser.add_argument("--deploys", type=int, default=10)
    parser.add_argument("--within", type=float, default=180.0, help="seconds per deploy")
    return parser.parse_args(list(argv))


async def run(args: argparse.Namespace) -> list[float]:
    """Seconds from create to Ready, one per deploy."""
    seconds: list[float] = []
    async with PlntClient.from_kubeconfig(args.kubeconfig) as client:
        for index in range(args.deploys):
            name = f"bench-{uuid.uuid4().hex[:6]}-{index}"
            took, _ = await deploys.deploy_once(
                client,
                name,
                namespace=args.namespace,
                ref=args.ref,
                digest=args.digest,
                target=args.target,
                within=args.within,
            )
            seconds.append(took)
            await deploys.delete_and_wait(client, name, namespace=args.namespace)
    return seconds


def report(seconds: Sequence[float], *, target: str) -> str:
    lines = [
        f"apply → Ready, target {target}, {len(seconds)} deploys:",
        f"  p50 {harness.percentile(seconds, 0.5):.2f} s, "
        f"p90 {harness.percentile(seconds, 0.9):.2f} s, max {max(seconds):.2f} s",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.deploys < 1:
        print("--deploys must be at least 1", file=sys.stderr)
        return 2
    try:
        seconds = asyncio.run(run(args))
    except (harness.BenchmarkError, client_errors.ClientError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(report(seconds, target=args.target), flush=True)
    return 0
