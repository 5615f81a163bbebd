"""The commands of ``beeweave`` (see :mod:`beeweave_core.cli` for the parser).

Each ``cmd_<name>(args)`` returns an exit code and raises ``BeeWeaveError`` (or
``OSError``) for anything the user should fix; ``cli.main`` prints it as one line.
A command works the same on a local store (through ``MemoryService``) and on a server
(through ``BeeWeaveClient``); only ``report`` and document import need a local store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import InvalidInputError, NotFoundError

__all__ = [f"cmd_{n}" for n in ("demo", "ingest", "search", "serve", "worker", "stats", "export", "import", "copy", "reembed", "forget",
                                 "maintain", "invalidate", "review", "memory", "dead_letters", "report", "openapi", "mcp")]


def _is_remote(store: str) -> bool:
    return store.startswith(("http://", "https://"))


@contextmanager
def _service(args: Any, *, existing: bool = False) -> Iterator[Any]:
    """A ``MemoryService`` on the local store, or a ``BeeWeaveClient`` for a server URL.
    ``existing``: a command that only reads or changes what is stored refuses a SQLite store
    that does not exist instead of creating an empty one (a mistyped ``--store``)."""
    if _is_remote(args.store):
        from .client import BeeWeaveClient

        if args.tenant:
            raise InvalidInputError("--tenant is for local stores; a server picks the tenant from --api-key")
        client = BeeWeaveClient(args.store, args.api_key)
        try:
            yield client
        finally:
            client.close()
        return
    from .server.service import MemoryService
    from .server.stores import local_store_path, open_memory

    path = local_store_path(args.store, args.tenant)
    if existing and path is not None and not path.exists():
        raise NotFoundError(f"no store at {path}: check --store{' and --tenant' if args.tenant else ''} "
                            "(only commands that write create a store)")
    svc = MemoryService(open_memory(args.store, tenant=args.tenant, embedder=args.embedder))
    try:
        yield svc
    finally:
        svc.close()


def _local(args: Any, what: str) -> Any:
    if _is_remote(args.store):
        raise InvalidInputError(f"{what} reads the store directly: pass a store path or a PostgreSQL URL, "
                                "not a server URL")
    return _service(args, existing=True)


def _show_progress() -> bool:
    """Progress bars are for a person watching a terminal, not for pipes and logs."""
    return sys.stdout.isatty()


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# -- demo --------------------------------------------------------------------------------------------
def cmd_demo(args: Any) -> int:
    from .demo import main as demo_main

    return int(demo_main() or 0)


# -- ingest -----------------------------------------------------------------------------------------------
def _jsonl_records(path: Path) -> list[tuple[int, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    out.append((n, json.loads(line)))
                except ValueError as exc:
                    raise InvalidInputError(f"{path}:{n}: not a JSON line ({exc})") from None
    return out


def _plan(args: Any) -> tuple[list[tuple[Path, int, dict[str, Any]]], list[Path]]:
    """Split the files into events (validated) and documents, before anything is written."""
    from datetime import datetime, timezone

    from .ingest.validate import event_dict, looks_like_event

    events: list[tuple[Path, int, dict[str, Any]]] = []
    documents: list[Path] = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise InvalidInputError(f"no such file: {path}")
        records = _jsonl_records(path) if path.suffix.lower() in (".jsonl", ".ndjson") else []
        as_events = args.kind == "events" or (args.kind == "auto" and records and all(looks_like_event(r) for _, r in records))
        if args.kind == "events" and not records:
            raise InvalidInputError(f"{path}: --as events needs a JSONL file of knowledge events")
        if not as_events:
            documents.append(path)
            continue
        for n, rec in records:
            if not isinstance(rec, dict):
                raise InvalidInputError(f"{path}:{n}: an event is a JSON object")
            rec = dict(rec)
            if "user_id" not in rec:
                if not args.user_id:
                    raise InvalidInputError(f"{path}:{n}: the event has no user_id; pass --user-id")
                rec["user_id"] = args.user_id
            try:
                event_dict(rec, now=datetime.now(timezone.utc))
            except InvalidInputError as exc:
                raise InvalidInputError(f"{path}:{n}: {exc}") from None
            events.append((path, n, rec))
    if documents and not args.user_id:
        raise InvalidInputError(f"documents ({documents[0]}) need --user-id: whose memories do they become?")
    return events, documents


def cmd_ingest(args: Any) -> int:
    from tqdm.auto import tqdm

    events, documents = _plan(args)
    if documents and _is_remote(args.store):
        raise InvalidInputError("document import reads the store directly: pass a store path, not a server URL")
    with _service(args) as svc:
        if events:
            for path, n, rec in tqdm(events, desc="beeweave ingest", unit="event", file=sys.stderr,
                                     disable=not _show_progress()):
                try:
                    svc.ingest(rec)
                except InvalidInputError as exc:
                    raise InvalidInputError(f"{path}:{n}: {exc}") from None
            print(f"queued {len(events)} event(s)")
            if not args.no_wait:
                if svc.flush(args.timeout):
                    print("all queued events are processed")
                else:
                    print(f"events are still queued after {args.timeout:g} s; they will be processed later",
                          file=sys.stderr)
        if documents:
            ids = svc.memory.import_documents(documents, user_id=args.user_id, agent_id=args.agent_id,
                                              tags=args.tag, review=args.review, show_progress=_show_progress())
            print(f"imported {len(ids)} chunk(s) from {len(documents)} document(s)")
    return 0


# -- search -----------------------------------------------------------------------------------------------
_LIST_FILTERS = {"user_id", "agent_id", "session_id", "tags", "tags_any", "tags_all", "entities", "type", "intent",
                 "status", "ids"}


def _filters(items: list[str]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"--filter takes KEY=VALUE, got {item!r}")
        out[key] = [v for v in value.split(",") if v] if key in _LIST_FILTERS else value
    return out or None


def cmd_search(args: Any) -> int:
    with _service(args, existing=True) as svc:
        hits = svc.search(args.query, user_id=args.user_id, k=args.k, filters=_filters(args.filter),
                          fusion=args.fusion, min_score=args.min_score, mmr=args.mmr, expand=args.expand or None,
                          loosen=args.loosen, min_relevance=args.min_relevance,
                          abstain_below=args.abstain_below)
    if args.json:
        _print_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("no memories found")
    for i, h in enumerate(hits, start=1):
        how = ",".join(h.sources)
        rel = "" if h.relevance is None else f"  relevance {h.relevance:.3f}"
        print(f"{i:>2}. {h.score:.4f}  {h.id}  [{h.chunk.user_id}; {how}]{rel}")
        print(f"    {_one_line(h.chunk.raw_content)}")
    return 0


# -- serve --------------------------------------------------------------------------------------------------
def _require_server_extras(store: str) -> None:
    """Name the missing extra before anything is printed or opened, not after "serving ..."."""
    from .errors import MissingDependencyError
    from .server.stores import is_postgres_url

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(f'beeweave serve needs {exc.name or "fastapi and uvicorn"}: '
                                     'pip install "beeweave-memory[server]"') from exc
    if is_postgres_url(store):
        from .store import postgres  # noqa: F401  (raises MissingDependencyError naming beeweave-memory[postgres])


def _server_config(args: Any) -> Any:
    """The ``ServerConfig`` of ``serve``'s arguments (also what ``config show server`` prints)."""
    from .server import ServerConfig, keys_from_env, load_api_keys

    if _is_remote(args.store):
        raise InvalidInputError("serve needs a local store (a directory, a SQLite file or a PostgreSQL URL)")
    keys = load_api_keys(args.api_keys) if args.api_keys else keys_from_env()
    if not keys:
        raise InvalidInputError("no API keys: pass --api-keys FILE or set BEEWEAVE_API_KEYS='key:tenant,...'")
    webhooks: list[Any] = []
    if args.webhooks:
        try:
            webhooks = json.loads(Path(args.webhooks).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InvalidInputError(f"{args.webhooks} is not JSON: {exc}") from None
        if not isinstance(webhooks, list) or not all(isinstance(w, dict) and {"url", "secret"} <= set(w)
                                                     for w in webhooks):
            raise InvalidInputError(f"{args.webhooks}: a JSON list of {{\"url\", \"secret\", ...}} objects")
    config = ServerConfig(args.store, keys, embedder=args.embedder, max_body_bytes=args.max_body_bytes,
                          queue_dir=args.queue_dir, read_timeout=args.read_timeout,
                          keep_alive_timeout=args.keep_alive, max_connections=args.max_connections,
                          tenant_concurrency=args.tenant_concurrency, webhooks=webhooks,
                          maintain_interval=args.maintain_every, max_k=args.max_k,
                          max_flush_timeout=args.max_flush_timeout, tenant_queue=args.tenant_queue,
                          max_events=args.max_events, webhook_queue=args.webhook_queue)
    return config


def cmd_serve(args: Any) -> int:
    from .server import serve

    if _is_remote(args.store):
        raise InvalidInputError("serve needs a local store (a directory, a SQLite file or a PostgreSQL URL)")
    _require_server_extras(args.store)
    config = _server_config(args)
    tenants = sorted(config.tenants)
    print(f"beeweave: serving {len(tenants)} tenant(s) ({', '.join(tenants)}) from {args.store} "
          f"on http://{args.host}:{args.port}", file=sys.stderr)
    serve(config, host=args.host, port=args.port, log_level=args.log_level, json_logs=args.json_logs)
    return 0


# -- worker ---------------------------------------------------------------------------------------------------
def cmd_worker(args: Any) -> int:
    """Until SIGTERM or Ctrl-C; the logic is in store/postgres/worker.py."""
    import signal
    import threading

    from .store.postgres.worker import run_worker

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    scope = f"tenant {args.tenant!r}" if args.tenant else "every tenant"
    print(f"beeweave: draining the ingest queue of {scope} in {args.store}", file=sys.stderr)
    run_worker(args.store, tenants=[args.tenant] if args.tenant else None, embedder=args.embedder,
               stop=stop, rescan=args.rescan, opened=lambda t: print(f"beeweave: worker on tenant {t!r}",
                                                                    file=sys.stderr, flush=True))
    return 0


# -- config -----------------------------------------------------------------------------------------------------
def cmd_config(args: Any) -> int:
    """The options a service command would use (the table and the masking are in options.py), or
    the effective settings of a store or a server (effective_settings.py)."""
    from . import options
    from .cli_parser import build_parser

    flags = [f for f in args.flags if f != "--json"]  # `config show serve --port 1 --json`: ours, not serve's
    as_json = args.json or len(flags) < len(args.flags)
    if args.for_command in ("store", "server"):
        from .effective_settings import render_settings

        settings = _store_settings(args, flags) if args.for_command == "store" else _served_settings(args, flags)
        if as_json:
            _print_json(settings)
        else:
            print(render_settings(settings))
        return 0
    if flags and not args.for_command:
        raise InvalidInputError(f"flags {flags} need the command they are for: beeweave config show serve ...")
    rows = options.resolved(args, None)
    for command in [args.for_command] if args.for_command else ["serve", "worker", "mcp"]:
        # parsed as `beeweave COMMAND FLAGS` would be: the same defaults, variables and checks
        rows += options.resolved(build_parser().parse_args([command, *(flags if command == args.for_command else [])]),
                                 command)
    if as_json:
        _print_json([r.to_dict() for r in rows])
    else:
        print(options.render(rows))
    return 0


def _store_settings(args: Any, flags: list[str]) -> dict[str, Any]:
    """``config show store [--store X] [--tenant T] [--embedder E]``: the flags after ``store`` win
    over the same global ones, so both ``beeweave --store X config show store`` and
    ``beeweave config show store --store X`` work."""
    from . import options
    from .cli_parser import CommandParser
    from .effective_settings import store_settings

    parser = CommandParser(prog="beeweave config show store")
    options.add_arguments(parser, None)
    ns = parser.parse_args(flags)
    given = {r.option.dest for r in options.resolved(ns, None) if r.source == "flag"}
    store, tenant, embedder = ((getattr(ns, d) if d in given else getattr(args, d)) for d in ("store", "tenant", "embedder"))
    if _is_remote(store):
        raise InvalidInputError("config show store reads a local store or a PostgreSQL URL; for a server's, run "
                                "config show server where it runs")
    return store_settings(store, tenant=tenant, embedder=embedder)


def _served_settings(args: Any, flags: list[str]) -> dict[str, Any]:
    """``config show server [serve's flags]``: the ServerConfig ``serve`` would build, without secrets."""
    from .cli_parser import build_parser
    from .effective_settings import server_settings

    served = build_parser().parse_args(["serve", *flags])  # serve's defaults, variables and checks
    for name in ("store", "tenant", "embedder"):  # the global options, given before `config`
        setattr(served, name, getattr(args, name))
    return server_settings(_server_config(served), host=served.host, port=served.port, log_level=served.log_level,
                           json_logs=served.json_logs)


# -- stats ----------------------------------------------------------------------------------------------------
def _stats_dict(svc: Any, user_id: str | None, top: int) -> dict[str, Any]:
    found = svc.stats(user_id=user_id, top=top)
    return found if isinstance(found, dict) else found.to_dict()


def cmd_stats(args: Any) -> int:
    with _service(args, existing=True) as svc:
        s = _stats_dict(svc, args.user_id, args.top)
    if args.json:
        _print_json(s)
        return 0
    from .cli_format import print_stats

    print_stats(s)
    return 0


# -- export / forget --------------------------------------------------------------------------------------------
def cmd_export(args: Any) -> int:
    with _service(args, existing=True) as svc:
        data = svc.export_user(args.user_id)
    from .server.service import MemoryService

    if MemoryService.export_is_empty(data):  # as a server answers (404): the same on both
        raise NotFoundError(f"no data of user {args.user_id!r}")
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    if args.output:
        out = Path(args.output)
        if out.is_dir():
            raise InvalidInputError(f"{out} is a directory; give a file name")
        out.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {len(data['chunks'])} memories of {args.user_id!r} to {out}", file=sys.stderr)
    else:
        sys.stdout.write(text + "\n")
    return 0


def cmd_import(args: Any) -> int:
    from .errors import BeeWeaveError
    from .server.export_files import check_apart, read_export

    # Every file read and checked, alone and against the others, before anything is written.
    exports = [(Path(name), *read_export(Path(name))) for name in args.files]
    check_apart([(path, plan) for path, _, plan in exports])
    with _service(args) as svc:
        # The store's checks too (a local store's parts, or the server's, a request per file),
        # for every file before any is written: a refused file leaves the others unwritten.
        plans = {}
        for path, data, _ in exports:
            try:
                plans[path] = svc.check_import(data)
            except BeeWeaveError as exc:
                raise type(exc)(f"{path}: {exc}") from None
        done: list[str] = []
        for path, _, _ in exports:
            try:
                _print_import(svc.import_user(plans[path]), str(path))
            except BeeWeaveError as exc:  # say which files are in, not only that this one is not
                before = f"; {', '.join(done)} imported before it" if done else ""
                raise type(exc)(f"{path}: {exc}{before}") from exc
            done.append(str(path))
    return 0


def _print_import(report: Any, source: str) -> None:
    r = report if isinstance(report, dict) else report.to_dict()
    extra = "".join(f", {n} {k}" for k, n in r["other"].items() if n)
    again = f" ({r['skipped']} already there)" if r["skipped"] else ""
    print(f"{source}: user {r['user_id']!r}: {r['memories']} memories{again}, {r['relationships']} relationships, "
          f"{r['versions']} versions, {r['audit']} audit entries{extra}")


def cmd_copy(args: Any) -> int:
    from .embedders import recorded_model
    from .errors import EmbedderMismatchError
    from .server.service import MemoryService
    from .server.stores import open_memory

    if _is_remote(args.to):
        raise InvalidInputError("copy writes the destination store directly: --to takes a store path or a "
                                "PostgreSQL URL (to import into a server, use export and then import)")
    with _local(args, "copy") as src:
        model = recorded_model(src.memory.backend)
        if model is None:
            print("the source store holds no memories: nothing to copy")
            return 0
        src.memory.flush()  # events still queued are stored first, so they are copied too
        try:  # the source's model, so that its vectors are copied instead of embedded again
            dst_memory = open_memory(args.to, tenant=args.to_tenant, embedder=model)
            same_model = True
        except EmbedderMismatchError:
            dst_memory = open_memory(args.to, tenant=args.to_tenant)
            same_model = False
            print(f"the destination was built with another model than {model!r}: every memory is embedded again",
                  file=sys.stderr)
        dst = MemoryService(dst_memory)
        try:
            if src.declared_fields():
                dst.declare_fields(src.declared_fields())
            for user in args.users or src.memory.user_data.users():
                data = src.export_user(user)
                if MemoryService.export_is_empty(data):
                    if not args.users:  # only entries written before they carried their user: nothing to copy
                        continue
                    raise NotFoundError(f"no data of user {user!r} in the source store")
                ids = [c["id"] for c in data["chunks"]]
                vectors = src.memory.backend.get_vectors(ids) if same_model else None
                _print_import(dst.import_user(data, vectors=vectors), "copy")
        finally:
            dst.close()
    return 0


def cmd_reembed(args: Any) -> int:
    with _local(args, "reembed") as svc:
        memory = svc.memory
        before = memory.embedder.name
        n = memory.reembed(args.to, batch_size=args.batch_size, show_progress=_show_progress())
        print(f"re-embedded {n} memories: {before} -> {memory.embedder.name}")
    return 0


def cmd_forget(args: Any) -> int:
    if not args.yes:
        raise InvalidInputError(f"forgetting {args.user_id!r} cannot be undone: add --yes to confirm")
    with _service(args, existing=True) as svc:
        n = svc.forget_user(args.user_id)
    print(f"forgot {args.user_id!r}: {n} memories deleted")
    return 0


# -- maintain / review ---------------------------------------------------------------------------------------------
def cmd_maintain(args: Any) -> int:
    with _service(args, existing=True) as svc:
        report = svc.maintain(user_id=args.user_id).to_dict()
    if args.json:
        _print_json(report)
    else:
        print(", ".join(f"{k} {v}" for k, v in report.items() if k != "merges"))
    return 0


def _git(repo: str, *argv: str) -> str:
    import subprocess

    try:
        done = subprocess.run(["git", "-C", repo, *argv], capture_output=True, text=True, check=True, timeout=60)
    except FileNotFoundError:
        raise InvalidInputError("--from-git needs git on the PATH") from None
    except subprocess.CalledProcessError as exc:
        raise InvalidInputError(f"git {' '.join(argv)} failed: {exc.stderr.strip()}") from None
    return done.stdout


def cmd_invalidate(args: Any) -> int:
    paths, commit = list(args.paths), args.commit
    if args.from_git:
        # The first commit has no parent: everything in it is new.
        has_parent = _git(args.repo, "rev-list", "--count", "HEAD").strip() not in ("", "1")
        diff = ["diff", "--name-only", "HEAD~1", "HEAD"] if has_parent else ["show", "--name-only", "--format=", "HEAD"]
        paths += [p for p in _git(args.repo, *diff).splitlines() if p.strip()]
        commit = commit or _git(args.repo, "rev-parse", "HEAD").strip()
    if not paths:
        raise InvalidInputError("no paths: name the changed files or pass --from-git")
    with _local(args, "invalidate") as svc:
        report = svc.memory.invalidate(paths, commit, user_id=args.user_id).to_dict()
    if args.json:
        _print_json(report)
    else:
        print(f"{len(report['marked'])} memories marked to verify, {len(report['updated'])} already marked"
              + (f" (commit {commit})" if commit else ""))
    return 0


# The old review actions (before issue 45) -> the decision they are now.
_OLD_REVIEW = {"approve": "keep", "reject": "delete"}


def cmd_review(args: Any) -> int:
    """One review flow (engine/review_flow.py): list what waits, then keep, archive or delete it."""
    from .server.service import review_dict

    action, ids = args.action, list(args.ids)
    if action in _OLD_REVIEW or action == "resolve":
        if action == "resolve":  # `review resolve ID DECISION`
            if len(ids) != 2:
                raise InvalidInputError("review resolve takes an id and a decision (keep, archive or delete)")
            ids, decision = ids[:1], ids[1]
        else:
            decision = _OLD_REVIEW[action]
        print(f"beeweave: `review {action}` is deprecated: use `review {decision} ID...`", file=sys.stderr)
        action = decision
    with _service(args, existing=True) as svc:
        if action == "list":
            if ids:
                raise InvalidInputError("review list takes no ids")
            items = svc.review(user_id=args.user_id)
            if args.json:
                _print_json([review_dict(i) for i in items])
                return 0
            print(f"{len(items)} waiting for review" + (":" if items else ""))
            for i in items:
                why = ", ".join(i.reasons)
                held = ((i.chunk.metadata.get("ingest") or {}).get("review") if i.chunk else None)
                held = "; ".join(map(str, held)) if isinstance(held, list) else held
                text = _one_line(i.chunk.raw_content, 80) if i.chunk else ""
                print(f"  {i.chunk_id}  [{i.user_id}]  {why}{f' ({held})' if held else ''}  {text}")
            return 0
        if not ids:
            raise InvalidInputError(f"review {action} needs memory ids")
        done = svc.decide(ids, action, reason=args.reason)
    print(f"{action}: {len(done)} of {len(ids)}" + (": " + " ".join(done) if done else ""))
    return 0


# -- memory / dead-letters ------------------------------------------------------------------------------------------
def _memory_line(c: Any) -> str:
    flags = " pinned" if c.pinned else ""
    tags = f" #{' #'.join(c.tags)}" if c.tags else ""
    return f"{c.id}  [{c.user_id}] {c.status.value}{flags}{tags}  {_one_line(c.raw_content, 80)}"


def _one_id(args: Any) -> str:
    if len(args.args) != 1:
        raise InvalidInputError(f"memory {args.action} takes one memory id")
    return str(args.args[0])


def _memory_fields(args: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if args.tag is not None:
        fields["tags"] = args.tag
    if args.pinned is not None:
        fields["pinned"] = args.pinned
    if args.expires_at is not None:
        fields["expires_at"] = None if args.expires_at.lower() == "none" else args.expires_at
    if args.confidence is not None:
        fields["confidence"] = args.confidence
    if args.status is not None:
        fields["status"] = args.status
    return fields


def cmd_memory(args: Any) -> int:
    with _service(args, existing=args.action != "add") as svc:
        if args.action == "add":
            if not args.args or not args.user_id:
                raise InvalidInputError("memory add takes the text and --user-id")
            chunk = svc.add_memory({"content": " ".join(args.args), "user_id": args.user_id, **_memory_fields(args)})
            print(chunk.id if not args.json else json.dumps(chunk.to_dict(), ensure_ascii=False, default=str))
            return 0
        if args.action == "list":
            if args.args:
                raise InvalidInputError("memory list takes no arguments (filters are options)")
            filters = {k: v for k, v in (("tags", args.tag), ("status", args.status)) if v}
            if _is_remote(args.store):
                page = svc.list_memories(user_id=args.user_id, tags=filters.get("tags"),
                                         status=None if args.status is None else [args.status],
                                         limit=args.limit, cursor=args.cursor)
            else:
                page = svc.list_memories(filters=filters, user_id=args.user_id, limit=args.limit, cursor=args.cursor)
            if args.json:
                _print_json({"memories": [c.to_dict() for c in page.items], "next_cursor": page.next_cursor})
                return 0
            for c in page.items:
                print(_memory_line(c))
            if page.next_cursor:
                print(f"more: --cursor {page.next_cursor}", file=sys.stderr)
            return 0
        chunk_id = _one_id(args)
        if args.action == "show":
            _print_json(svc.get_memory(chunk_id).to_dict())
        elif args.action == "edit":
            changes = _memory_fields(args)
            if args.content is not None:
                changes["content"] = args.content
            if not changes:
                raise InvalidInputError("memory edit needs a change: --content, --tag, --pin/--unpin, "
                                        "--expires-at, --confidence or --status")
            chunk = svc.update_memory(chunk_id, changes)
            print(_memory_line(chunk) if not args.json else json.dumps(chunk.to_dict(), default=str))
        elif args.action == "delete":
            if not svc.delete_memory(chunk_id):  # an error, as a server's 404 is: a script sees it
                raise NotFoundError(f"no chunk with id {chunk_id!r}")
            print(f"{chunk_id}: deleted")
        elif args.action == "history":
            versions = svc.history(chunk_id)
            _print_json([v if isinstance(v, dict) else {"seq": v.seq, "chunk": v.chunk.to_dict(),
                                                        "replaced_at": v.replaced_at.isoformat(), "reason": v.reason}
                         for v in versions])
        else:
            _print_json([e.to_dict() for e in svc.relationships(chunk_id)])
    return 0


def cmd_dead_letters(args: Any) -> int:
    with _service(args, existing=True) as svc:
        if args.action == "retry":
            n = svc.retry_dead_letters(args.ids or None)
            print(f"queued {n} dead event(s) again")
            return 0
        if args.ids:
            raise InvalidInputError("dead-letters list takes no ids")
        dead = svc.dead_letters(user_id=args.user_id)
        if args.json:
            _print_json([{"event": d.event.to_dict(), "error": d.error, "attempts": d.attempts,
                          "failed_at": d.failed_at.isoformat()} for d in dead])
            return 0
        print(f"{len(dead)} dead letter(s)" + (":" if dead else ""))
        for d in dead:
            print(f"  {d.event.id}  [{d.event.user_id}]  {d.attempts} attempt(s), {d.failed_at.isoformat()}: "
                  f"{_one_line(d.error, 100)}")
    return 0


# -- report / openapi ---------------------------------------------------------------------------------------------------
def cmd_report(args: Any) -> int:
    from .report import write_report

    with _local(args, "report") as svc:
        out = write_report(svc.memory, args.output, user_id=args.user_id, top=args.top, recorder=svc.recorder,
                           lang=args.lang)
    print(f"wrote {out}")
    return 0


def cmd_openapi(args: Any) -> int:
    from .server import ServerConfig, create_app

    # The spec does not depend on the stores or the keys: a throwaway configuration is enough.
    spec = create_app(ServerConfig(None, {"openapi-only-key": "openapi"})).openapi()
    text = json.dumps(spec, indent=2, ensure_ascii=False)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text + "\n")
    return 0


# -- mcp ----------------------------------------------------------------------------------------------------
def cmd_mcp(args: Any) -> int:
    from .mcp.cli import run

    return run(args)
