"""`rewardbox` command line.

    rewardbox serve [--host H] [--port P]          serve the HTTP API (embedded mode: local sandbox pool; with
                                                   REWARDBOX_REDIS_URL: distributed mode, workers do the scoring)
    rewardbox worker                               score jobs from REWARDBOX_REDIS_URL on a local warm sandbox pool
    rewardbox rollouts list [--failed] [--status S] [--language L] [--limit N]
    rewardbox replay ROLLOUT_ID [--local]          re-run a stored rollout and show what changed
    rewardbox export [--failed] > rollouts.jsonl
    rewardbox bench --dataset humaneval --samples samples.jsonl   pass@k, reward statistics, run recorded
The client commands (rollouts, replay, export, bench) talk to a running server: `--url` (default REWARDBOX_URL,
else http://127.0.0.1:8000) and `--token` (default REWARDBOX_TOKEN). They fail fast with one line a person can act
on (server down, wrong URL, missing token, missing or malformed file), no retries and no traceback.
`replay --local` reads the local rollout store and runs the item in a local sandbox pool instead.

`rollouts`, `replay` and `export` need the client package alone (`pip install rewardbox`: httpx); `serve`, `worker`,
`bench` (HumanEval's problems) and `replay --local` need the server extra, and say so in one line where it is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from datetime import datetime

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
SERVER_EXTRA = "pip install rewardbox-server"
# Our own packages: a module of these that does not import is a bug to show, not a missing extra.
OWN_PACKAGES = {"rewardbox", "service", "sandboxes", "graders", "trainer"}


class CliError(Exception):
    """One line for the person at the terminal."""


def _client(args: argparse.Namespace):
    from rewardbox import Client

    # No retries: a person is waiting, and a server that is down stays down for the next 16 s too.
    return Client(args.url, token=args.token, retries=0, timeout=httpx.Timeout(300.0, connect=5.0))


def _explain(error: Exception, url: str) -> str:
    """What went wrong talking to the server at `url`, and what to do about it."""
    if isinstance(error.__cause__, httpx.HTTPError):  # the client's TransportError wraps what httpx raised
        error = error.__cause__
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return f"cannot reach a rewardbox server at {url}: start one with `rewardbox serve`, or pass --url"
    if isinstance(error, httpx.TimeoutException):
        return f"the server at {url} did not answer in time"
    status = getattr(getattr(error, "response", None), "status_code", None) or getattr(error, "status", None)
    if status == 401:
        return f"the server at {url} wants a token: pass --token or set REWARDBOX_TOKEN"
    if status == 404:
        return f"{url} answered 404: is it a rewardbox server (or the rollout id wrong)?"
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return f"{url} is not a valid server URL (e.g. http://127.0.0.1:8000)"
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"the server at {url} failed the request: {first[:300]}"


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> None:
    with _client(args) as client:
        params = {"failed": str(args.failed).lower(), "limit": args.limit}
        if args.status:
            params["status"] = args.status
        if args.language:
            params["language"] = args.language
        page = client.rollouts(**params)
    rows = [[r["id"], datetime.fromtimestamp(r["created_at"]).isoformat(timespec="seconds"), r["status"],
             r["profile"] or "", "null" if r["reward"] is None else f"{r['reward']:.3f}", r["client_id"] or ""]
            for r in page["rollouts"]]
    print(_table(rows, ["rollout", "created", "status", "profile", "reward", "client id"]))


def _print_replay(replay: dict) -> None:
    if not replay["identical"]:
        verdict = "DIFFERENT (nondeterminism or a changed image/grader)"
    elif replay.get("exact", True):
        verdict = "identical"
    else:
        exact = replay["exact_diff"]
        moved = [k for k in exact if k != "components"] + [f"components.{n}" for n in exact.get("components", {})]
        verdict = f"identical within the documented tolerances (measured values moved: {', '.join(moved)})"
    print(f"replay of {replay['replay_of']} -> {replay['rollout_id']}: {verdict}")
    if not replay.get("same_image_and_versions", True):
        print("note: the sandbox image or grader versions differ from the stored rollout's")
    rows = []
    for key, change in replay["diff"].items():
        if key in ("components", "tests"):
            rows += [[f"{key}.{name}", str(c["stored"]), str(c["replayed"])] for name, c in sorted(change.items())]
        else:
            rows.append([key, repr(change["stored"])[:60], repr(change["replayed"])[:60]])
    if rows:
        print(_table(rows, ["field", "stored", "replayed"]))


async def _replay_local(rollout_id: str) -> dict:
    from sandboxes.image import use_cache_dir
    from service.config import sandbox_pool
    from service.models import RewardItem
    from service.rollouts.replay import compare
    from service.rollouts.store import RolloutStore
    from service.scoring import Scorer

    settings = _settings()
    use_cache_dir(settings.cache_dir)
    if settings.db_file is None:
        raise CliError("replay --local reads the rollout store, and REWARDBOX_DB=off turns it off")
    store = RolloutStore(settings.db_file)
    record = store.get(rollout_id)
    if record is None:
        sys.exit(f"no rollout {rollout_id} in {store.path}")
    async with sandbox_pool(settings, size=1) as pool:
        scorer = Scorer(pool, settings, store=store)
        result = (await scorer.score(RewardItem.model_validate(record["request"]))).model_dump(mode="json")
        same = record["image"] == scorer.image_id and record["versions"] == scorer.versions
    return {"rollout_id": result["rollout_id"], "replay_of": rollout_id, **compare(record["result"], result),
            "same_image_and_versions": same, "result": result}


def _settings():
    """The service's settings from the environment; a value that does not parse is one line naming it."""
    from service.config import ConfigError, Settings

    try:
        return Settings.from_env()
    except ConfigError as e:
        raise CliError(f"invalid configuration:\n{e}") from None


def cmd_replay(args: argparse.Namespace) -> None:
    if args.local:
        replay = asyncio.run(_replay_local(args.rollout_id))
    else:
        with _client(args) as client:
            replay = client.replay(args.rollout_id)
    _print_replay(replay)


def cmd_export(args: argparse.Namespace) -> None:
    count = 0
    try:
        with _client(args) as client:
            for record in client.export(failed=str(args.failed).lower()):
                sys.stdout.write(json.dumps(record) + "\n")
                count += 1
            sys.stdout.flush()
    except BrokenPipeError:  # `rewardbox export | head`: the reader has what it wanted; stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return
    print(f"exported {count} rollouts", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="rewardbox", description="Sandboxed code-execution reward service")
    # The options every client command takes (a parent parser: they go after the command, e.g. `bench --url`).
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--url", default=os.environ.get("REWARDBOX_URL") or DEFAULT_URL,
                        help="server URL (default: REWARDBOX_URL, else %(default)s)")
    remote.add_argument("--token", default=os.environ.get("REWARDBOX_TOKEN"), help="bearer token (REWARDBOX_TOKEN)")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the HTTP API (embedded mode: local sandbox pool)")
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    serve.add_argument("--log-level", default="info")
    worker = sub.add_parser("worker", help="distributed mode: score jobs from REWARDBOX_REDIS_URL on local sandboxes")
    worker.add_argument("--log-level", default="info")
    worker.add_argument("--health", action="store_true",
                        help="exit 0 if a worker on this host sent a heartbeat recently (container health check)")
    rollouts = sub.add_parser("rollouts", help="stored rollouts").add_subparsers(dest="action", required=True)
    lst = rollouts.add_parser("list", help="list rollouts, newest first", parents=[remote])
    lst.add_argument("--failed", action="store_true")
    lst.add_argument("--status")
    lst.add_argument("--language")
    lst.add_argument("--limit", type=int, default=50)
    replay = sub.add_parser("replay", help="re-run a stored rollout and show the differences", parents=[remote])
    replay.add_argument("rollout_id")
    replay.add_argument("--local", action="store_true", help="local store and sandbox instead of the server")
    bench = sub.add_parser("bench", help="score a model's samples on a benchmark: pass@k and reward statistics",
                           parents=[remote])
    bench.add_argument("--dataset", default="humaneval")
    bench.add_argument("--samples", required=True, help="JSONL of {task_id, completion}")
    bench.add_argument("--profile", default="binary")
    export = sub.add_parser("export", help="stream rollouts as JSONL to stdout", parents=[remote])
    export.add_argument("--failed", action="store_true")
    args = parser.parse_args(argv)
    try:
        _dispatch(args)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] in OWN_PACKAGES:
            raise
        sys.exit(f"rewardbox: `{args.command}` needs the server extra (no module named {e.name!r}): {SERVER_EXTRA}")
    except CliError as e:
        sys.exit(f"rewardbox: {e}")
    except KeyboardInterrupt:
        sys.exit(130)


def _dispatch(args: argparse.Namespace) -> None:
    from rewardbox import RewardboxError
    from service.benchmark import BenchError

    if args.command in ("rollouts", "replay", "export", "bench"):
        try:
            _client_command(args)
        except BenchError as e:
            raise CliError(str(e)) from None
        except (httpx.HTTPError, RewardboxError) as e:
            raise CliError(_explain(e, args.url)) from None
        return
    if args.command == "serve":
        from service.app import create_app
        from service.http_server import serve as serve_http

        logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        settings = _settings()
        serve_http(create_app(settings), args.host, args.port, args.log_level, settings.header_timeout_s)
    elif args.command == "worker":
        from service.distributed.worker import healthy
        from service.distributed.worker import serve as serve_worker

        settings = _settings()
        if args.health:
            sys.exit(0 if healthy(settings) else 1)
        logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        asyncio.run(serve_worker(settings))


def _client_command(args: argparse.Namespace) -> None:
    if args.command == "rollouts":
        cmd_list(args)
    elif args.command == "replay":
        cmd_replay(args)
    elif args.command == "export":
        cmd_export(args)
    elif args.command == "bench":
        from service.benchmark import run

        summary = run(args.samples, args.dataset, args.profile, client=_client(args))
        rows = [[k, f"{v:.4f}" if isinstance(v, float) else str(v)] for k, v in summary.items()]
        print(_table(rows, ["metric", "value"]))


if __name__ == "__main__":
    main()


