"""Repo tasks: a patch graded against a repository's own tests.

`models` holds the request shapes of repo items, `archive` checks an uploaded archive and rewrites it in the one form
sandboxes accept, `snapshots` stores repositories (`POST /repos`) and resolves items' references to them, and
`benchmark` is the offline repo-task benchmark built from real PyPI sdists."""
