"""The browser UI of `plnt ui`: a small web server on loopback that is a client of plnt.

Contract: it talks to plnt only through `plnt.client`, with the user's own kubeconfig,
context and credentials, so it shows what the user may see and does what the user may
do (their RBAC, their errors). It imports nothing of the server side (`apiserver`,
`registry`, `sagas`). Pages are rendered here from templates; live parts are the API's
own watches relayed to the browser as Server-Sent Events, never polling. Every request
needs the per-launch token (`security`), and every state change a CSRF token.
"""
