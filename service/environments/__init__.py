"""Task environments: repo items and sessions in a repository's own environment, not one fixed image.

`models` holds what a client sends (`EnvironmentSpec`, `EnvironmentRef`), `build` makes one environment (a bubblewrap
root filesystem and a Docker image) from a spec, `store` keeps them content-addressed and remembered across restarts,
`pools` resolves an item's `environment` to a sandbox target and keeps warm pools per environment within a budget, and
`routes` is `POST/GET /environments`."""
