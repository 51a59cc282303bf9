"""The quality gate's activity side: a canary's answers evaluated against the stable's.

`scoring` is pure (scorers and limits); `evaluating` fetches the cases and asks canary
and stable side by side; `judging` is the pairwise judge protocol; `shadowing` scores the
shadow pairs the API server collected. No workflow code here: the deploy saga's evaluate
step schedules these through `deploying.activities`.
"""
