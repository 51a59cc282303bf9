"""The quality gate: a canary's answers judged against the stable's, before promotion.

`workflow` holds the deploy's gate steps (smoke, analyze, evaluate: workflow code, in the
determinism contract), `activities` their side effects. `scoring` is pure (scorers and
limits); `evaluating` fetches the cases and asks canary and stable side by side;
`judging` is the pairwise judge protocol; `shadowing` scores the shadow pairs the API
server collected.
"""
